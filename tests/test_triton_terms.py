"""The one endpoint parser (triton_terms.parse_endpoint): what attach, control, status and the stats reader
take from a URL or HOST:PORT, and the one line a bad one gets."""

from __future__ import annotations

import pytest

from triton_ge_console.errors import GeConsoleError
from triton_ge_console.triton_terms import Endpoint, host_and_port, parse_endpoint


@pytest.mark.parametrize(("given", "read"), [
    ("127.0.0.1:8000", Endpoint("http", "127.0.0.1", 8000)),  # no scheme: the first allowed one
    ("HTTPS://Example.org:443/", Endpoint("https", "example.org", 443)),
    ("http://[::1]:8000", Endpoint("http", "::1", 8000)),  # an IPv6 literal, its brackets dropped
    ("[fe80::1]:9", Endpoint("http", "fe80::1", 9)),
    ("  localhost:1  ", Endpoint("http", "localhost", 1)),
])
def test_an_endpoint_is_read_with_its_scheme_host_and_port(given: str, read: Endpoint) -> None:
    assert parse_endpoint(given) == read


def test_an_ipv6_endpoint_is_written_back_with_brackets() -> None:
    endpoint = parse_endpoint("[::1]:8001", "--grpc-url", ("grpc",))
    assert (endpoint.scheme, endpoint.netloc, endpoint.url) == ("grpc", "[::1]:8001", "grpc://[::1]:8001")


def test_a_path_is_kept_only_where_one_is_allowed() -> None:
    assert parse_endpoint("http://h:8002/metrics/", path_allowed=True).url == "http://h:8002/metrics"
    with pytest.raises(GeConsoleError, match="an endpoint has no path"):
        parse_endpoint("http://h:8000/v2")


@pytest.mark.parametrize(("given", "said"), [
    ("http://noport", "expected http://HOST:PORT"),  # a missing port
    ("http://h:99999", "the port is not a number in 0-65535"),
    ("h:port", "the port is not a number in 0-65535"),
    ("ftp://h:21", "expected http://HOST:PORT"),
    ("http://:8000", "expected http://HOST:PORT"),
    ("http://u:p@h:1", "credentials, a query or a fragment are not taken here"),
    ("::::", "the port is not a number"),
    ("[::1", "expected http://HOST:PORT"),  # an unclosed IPv6 bracket
    ("h:1\nexit", "the port is not a number"),
    ("", "expected http://HOST:PORT"),
])
def test_garbage_is_refused_in_one_line_naming_it(given: str, said: str) -> None:
    with pytest.raises(GeConsoleError) as refused:
        parse_endpoint(given, "--url")
    message = str(refused.value)
    assert said in message and message.startswith(f"--url {given!r}") and "\n" not in message
    assert isinstance(refused.value, ValueError)  # callers that catch a ValueError still do


def test_a_lenient_reading_takes_what_a_record_has() -> None:
    assert parse_endpoint("h", strict=False) == Endpoint("http", "h", None)
    assert parse_endpoint("h:99999", schemes=("tcp",), strict=False) == Endpoint("tcp", "h", None)
    assert parse_endpoint("http://h:1/x", strict=False).path == "/x"


def test_host_and_port_of_an_address_or_a_url() -> None:
    """bench --generate, the load panels' timed runs: (host, port), an IPv6 literal without brackets."""
    assert host_and_port("127.0.0.1:8001") == ("127.0.0.1", 8001)
    assert host_and_port("[::1]:8001") == ("::1", 8001)
    assert host_and_port("http://h:8000/v1") == ("h", 8000)
    for garbage in ("h", "h:x", "[::1", ":8000"):
        with pytest.raises(GeConsoleError, match="expected HOST:PORT"):
            host_and_port(garbage, "--url")
