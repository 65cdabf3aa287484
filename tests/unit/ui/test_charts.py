"""The dashboard's SVG charts draw every label as text (gpuplan.ui.charts)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from gpuplan.ui.charts import Point, bars, line, scatter

HOSTILE = '<script>window.pwned=1</script><img src=x onerror="alert(1)">'


def _svg(markup: str) -> ET.Element:
    return ET.fromstring(markup)  # well-formed XML: nothing a label holds can open a tag


def test_labels_are_escaped_in_every_chart() -> None:
    drawn = [
        scatter([Point(1.0, 2.0, HOSTILE), Point(3.0, 1.0, "b", "pareto")], x_label=HOSTILE, y_label="y",
                title=HOSTILE, log=True, line_kind="pareto"),
        line([Point(1, 2.0, HOSTILE), Point(2, 1.0)], x_label="step", y_label=HOSTILE, title=HOSTILE),
        bars([(HOSTILE, 2.0), ("b", 1.0)], title=HOSTILE),
    ]
    for markup in drawn:
        root = _svg(str(markup))
        assert not [e for e in root.iter() if e.tag.split("}")[-1] in ("script", "img", "foreignObject")]
        assert HOSTILE in "".join(root.itertext())  # shown, as text
        assert "<script" not in str(markup)


def test_the_pareto_points_are_joined_in_time_order_and_drawn_on_top() -> None:
    markup = str(scatter([Point(10.0, 5.0, "a", "pareto"), Point(5.0, 9.0, "b", "point"),
                          Point(2.0, 20.0, "c", "pareto")], x_label="h", y_label="$", title="t", log=True,
                         line_kind="pareto"))
    root = _svg(markup)
    circles = [e for e in root.iter() if e.tag.endswith("circle")]
    assert [c.get("class") for c in circles] == ["point", "pareto", "pareto"]
    polyline = next(e for e in root.iter() if e.tag.endswith("polyline"))
    xs = [float(pair.split(",")[0]) for pair in (polyline.get("points") or "").split()]
    assert xs == sorted(xs) and len(xs) == 2


def test_too_little_to_draw_says_so() -> None:
    assert "nothing to draw" in scatter([], x_label="x", y_label="y", title="t")
    assert "not enough metrics" in line([Point(1, 1.0)], x_label="x", y_label="y", title="t")
    assert "no spend" in bars([], title="t")
