"""A cloud is a package and a registry line: which clouds the catalog prices, their spot interruption rates, their
start-up allowance and whose bill `report --bill` reads all come from the providers' declarations, never from a
list of cloud names elsewhere (issue 39)."""

from __future__ import annotations

import sys
import types
from typing import ClassVar

import pytest

from gpuplan.books.cloud_bill import billed_clouds
from gpuplan.calibration.startup import FALLBACK, provider_default
from gpuplan.catalog.catalog import Catalog
from gpuplan.planning.planner import SpotModel, default_interruption_rates
from gpuplan.providers import registry
from gpuplan.providers.azure.provider import AzureProvider
from gpuplan.providers.base import Instance, Provider
from gpuplan.providers.registry import catalog_clouds, catalog_providers


class NimbusProvider(Provider):
    """A cloud nobody in gpuplan names: what a new provider package declares."""

    name: ClassVar[str] = "nimbus"
    cloud: ClassVar[str] = "nimbus"
    spot_interruptions_per_hour: ClassVar[float | None] = 1 / 4
    startup_seconds: ClassVar[float | None] = 42.0
    startup_why: ClassVar[str] = "nimbus boots fast"

    def launch(self, request: object) -> list[Instance]:
        return []

    def describe(self, instance_ids: object) -> list[Instance]:
        return []

    def terminate(self, instance_ids: object) -> None:
        return None

    def list_tagged(self, run_id: str | None = None, *, include_ended: bool = False) -> list[Instance]:
        return []


def test_the_builtin_clouds_come_from_the_registry() -> None:
    assert catalog_clouds() == ("aws", "gcp", "azure")  # local and slurm quote their own rate
    rates = default_interruption_rates()
    assert rates == {cloud: cls.spot_interruptions_per_hour for cloud, cls in catalog_providers().items()}
    assert rates["azure"] == AzureProvider.spot_interruptions_per_hour == 0.1
    assert SpotModel().rate("azure") == 0.1
    assert provider_default("azure").seconds == AzureProvider.startup_seconds
    assert provider_default("local").seconds == 2.1 and provider_default("no-such-provider") == FALLBACK
    assert billed_clouds() == frozenset({"aws"})


def test_a_new_provider_is_one_registry_line(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("nimbus_provider")
    module.NimbusProvider = NimbusProvider  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "nimbus_provider", module)
    monkeypatch.setitem(registry.BUILTIN_PROVIDERS, "nimbus", "nimbus_provider:NimbusProvider")

    assert catalog_clouds() == ("aws", "gcp", "azure", "nimbus")
    assert default_interruption_rates()["nimbus"] == 0.25
    assert provider_default("nimbus").seconds == 42.0 and provider_default("nimbus").why == "nimbus boots fast"
    catalog = Catalog.load(None, catalog_clouds())  # no shipped file and no refresh yet: no offers, and says so
    assert catalog.sources["nimbus"].offer_count == 0
    assert "gpuplan catalog refresh --cloud nimbus" in catalog.sources["nimbus"].source
    assert {o.cloud for o in catalog.offers} == {"aws", "gcp", "azure"}
