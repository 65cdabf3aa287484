"""The dashboard's gate as values (gpuplan.ui.security); tests/e2e/test_ui_http.py drives it over HTTP."""

from __future__ import annotations

from gpuplan.ui.security import Guard, host_header, is_loopback


def test_loopback_is_127_slash_8_ipv6_one_and_localhost_only() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.3.2.1", "::1", "[::1]", "localhost", "LOCALHOST"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.5", "example.com", "localhost.evil.test"))


def test_a_guard_answers_to_the_loopback_names_with_its_port_only() -> None:
    guard = Guard.for_bind("127.0.0.1", 8765, None, b"s")
    assert guard.allowed_hosts == {"127.0.0.1:8765", "localhost:8765", "[::1]:8765"}
    assert not guard.any_host
    assert host_header("::1", 80) == "[::1]:80"


def test_every_address_means_any_host_name_but_only_with_a_token() -> None:
    assert Guard.for_bind("0.0.0.0", 1, "t" * 20, b"s").any_host
    assert not Guard.for_bind("0.0.0.0", 1, None, b"s").any_host
    assert not Guard.for_bind("192.168.1.5", 1, "t" * 20, b"s").any_host


def test_tokens_compare_whole_and_csrf_comes_from_the_secret() -> None:
    guard = Guard.for_bind("127.0.0.1", 1, "right-token-123456", b"secret")
    assert guard.token_ok("right-token-123456")
    assert not guard.token_ok("right-token-12345") and not guard.token_ok(None)
    assert guard.csrf_ok(guard.csrf_token())
    assert not guard.csrf_ok(Guard.for_bind("127.0.0.1", 1, None, b"other").csrf_token())
    assert not guard.csrf_ok(None) and not guard.csrf_ok("")
