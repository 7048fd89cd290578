"""The HTTP geocoder against a Nominatim- and Pelias-speaking server on 127.0.0.1.

The real services cannot run here; ``geocoding_server`` answers with their documented
JSON over real HTTP, and misbehaves on purpose (429 with Retry-After, 503, slow, not JSON).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from geocoding_server import PLACES, GeocodingService
from serving import running

from toolkit.errors import OptionError
from toolkit.geocoding.config import ServiceSettings, service_from_config
from toolkit.geocoding.http import HttpGeocoder, RateLimit


@pytest.fixture
def service() -> GeocodingService:
    return GeocodingService(list(PLACES))


@pytest.fixture
def url(service: GeocodingService) -> Iterator[str]:
    with running(service.app()) as base:
        yield base


def geocoder(url: str, protocol: str = "nominatim", **kwargs: object) -> HttpGeocoder:
    settings: dict[str, object] = {"rate_per_s": 1000.0, "backoff_s": 0.01, **kwargs}
    return HttpGeocoder(url, protocol, **settings)  # type: ignore[arg-type]


def ask(client: HttpGeocoder, *texts: str, **options: object) -> pd.DataFrame:
    return client.geocode(pd.Series(list(texts)), options)


def test_nominatim_finds_a_place(url: str, service: GeocodingService) -> None:
    with geocoder(url) as client:
        found = ask(client, "12 Smith Street Kew")
    port = url.rsplit(":", 1)[1]
    row = found.iloc[0].to_dict()
    assert row == {
        "longitude": 145.0301,
        "latitude": -37.8001,
        "label": "12 Smith Street, Kew, Victoria, 3101",
        "accuracy": 90.0,
        "err": None,
        "source": f"nominatim:127.0.0.1:{port}",
        "place_id": "node/501",
        "feature": "premise",
        "name": "12 Smith Street Kew Victoria 3101",
    }
    assert service.params == [
        {"q": "12 Smith Street Kew", "format": "jsonv2", "limit": "10", "addressdetails": "1"}
    ]


def test_pelias_finds_a_place_with_its_confidence(url: str, service: GeocodingService) -> None:
    with geocoder(url + "/v1", "pelias") as client:
        found = ask(client, "12 Smith Street Kew", "Kew Primary School")
    assert found["place_id"].tolist() == [
        "openstreetmap:address:node/501",
        "openstreetmap:venue:way/88",
    ]
    assert found["accuracy"].tolist() == [87.0, 95.0]
    assert found["feature"].tolist() == ["premise", "venue"]
    assert found["name"].tolist() == ["12 Smith Street Kew Victoria 3101", "Kew Primary School"]
    assert found["source"].str.startswith("pelias:127.0.0.1:").all()
    # The geocoder asks in parallel, so the service may see the two in either order.
    assert sorted(p["text"] for p in service.params) == [
        "12 Smith Street Kew",
        "Kew Primary School",
    ]


@pytest.mark.parametrize("protocol", ["nominatim", "pelias"])
def test_no_result(url: str, protocol: str) -> None:
    with geocoder(url, protocol) as client:
        found = ask(client, "99 Nowhere Lane Atlantis")
    assert np.isnan(found.loc[0, "longitude"])
    assert found.loc[0, "err"] == f"{client.source}: no place found"


def test_required_features_nominatim_filters_its_answers(url: str) -> None:
    with geocoder(url) as client:
        street = ask(client, "Smith Street Kew", requiredFeatures=["street"])
        region = ask(client, "Smith Street", requiredFeatures=["region"])
        locality = ask(client, "Kew Victoria", requiredFeatures=["locality"])
    assert (street.loc[0, "place_id"], street.loc[0, "feature"]) == ("way/77", "street")
    assert street.loc[0, "accuracy"] == 70.0
    assert region.loc[0, "err"] == (
        f"{client.source}: 3 places found, none a region (found: premise, street, venue)"
    )
    assert locality.loc[0, "place_id"] == "relation/9"


def test_required_features_pelias_asks_for_layers(url: str, service: GeocodingService) -> None:
    with geocoder(url, "pelias") as client:
        found = ask(client, "Smith Street Kew", requiredFeatures=["street", "locality"])
    assert service.params[0]["layers"] == ("street,neighbourhood,borough,locality,localadmin")
    assert found.loc[0, "place_id"] == "openstreetmap:street:way/77"


def test_429_waits_as_retry_after_says(url: str, service: GeocodingService) -> None:
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    with geocoder(url, sleep=sleep) as client:
        started = time.monotonic()
        found = ask(client, "busy 5 High Road Camberwell")
        took = time.monotonic() - started
    assert found.loc[0, "place_id"] == "way/55"
    assert found.loc[0, "feature"] == "premise"
    assert waits == [1.0]
    assert took >= 1.0
    assert service.asked["busy 5 High Road Camberwell"] == 2
    assert service.times[1] - service.times[0] >= 1.0


def test_retry_after_as_an_http_date(url: str, service: GeocodingService) -> None:
    service.retry_after = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 2))
    waits: list[float] = []
    with geocoder(url, sleep=waits.append) as client:
        found = ask(client, "busy 5 High Road Camberwell")
    assert found.loc[0, "place_id"] == "way/55"
    assert len(waits) == 1 and 0.5 <= waits[0] <= 2.0


def test_a_retry_after_too_long_is_not_waited_for_and_stops_the_batch(
    url: str, service: GeocodingService
) -> None:
    waits: list[float] = []
    with geocoder(url, sleep=waits.append, workers=1, max_wait_s=30) as client:
        found = ask(client, "long wait 1", "12 Smith Street Kew", "Kew Victoria")
    message = (
        f"{client.source}: HTTP 429, asked to wait 120 s (Retry-After), more than the 30 s allowed"
    )
    assert found["err"].tolist() == [message] * 3
    assert waits == []
    assert sum(service.asked.values()) == 1  # the rest of the batch was not sent


def test_503_is_retried_then_given_up(url: str, service: GeocodingService) -> None:
    with geocoder(url, max_attempts=3, workers=1) as client:
        found = ask(client, "down 1", "12 Smith Street Kew")
        again = ask(client, "12 Smith Street Kew")
    message = f"{client.source}: HTTP 503 after 3 attempts"
    assert found["err"].tolist() == [message, message]
    assert service.asked["down 1"] == 3
    assert "12 Smith Street Kew" not in service.asked or found.loc[1, "err"] == message
    # A failure is not remembered: the next batch asks again.
    assert again.loc[0, "place_id"] == "node/501"


def test_timeout(url: str, service: GeocodingService) -> None:
    service.slow_s = 1.5
    with geocoder(url, timeout_s=0.3, max_attempts=2, workers=1) as client:
        started = time.monotonic()
        found = ask(client, "slow 7 Low Road Camberwell", "12 Smith Street Kew")
        took = time.monotonic() - started
    message = f"{client.source}: no answer within 0.3 s after 2 attempts"
    assert found["err"].tolist() == [message, message]
    assert service.asked["slow 7 Low Road Camberwell"] == 2
    assert took < 1.5  # two timeouts, not two slow answers, and the rest not sent


def test_not_json(url: str) -> None:
    with geocoder(url) as client:
        found = ask(client, "garbage")
    assert found.loc[0, "err"].startswith(f"{client.source}: the answer is not nominatim JSON")


def test_each_distinct_text_is_asked_once_per_run(url: str, service: GeocodingService) -> None:
    with geocoder(url) as client:
        first = ask(client, "12 Smith Street Kew", " 12  smith street KEW ", "Nowhere at all")
        second = ask(client, "12 SMITH STREET KEW", "Nowhere at all")
    assert first["place_id"].tolist() == ["node/501", "node/501", None]
    assert second["place_id"].tolist() == ["node/501", None]
    assert sum(service.asked.values()) == 2
    # Another requirement is another question.
    with geocoder(url) as client:
        ask(client, "12 Smith Street Kew")
        ask(client, "12 Smith Street Kew", requiredFeatures=["premise"])
    assert service.asked["12 Smith Street Kew"] == 3


def test_requests_keep_to_the_rate(url: str, service: GeocodingService) -> None:
    texts = [f"{n} Town Hall Place Richmond" for n in (1, 2, 3)] + ["Kew", "Smith Street"]
    with geocoder(url, rate_per_s=10.0, workers=4) as client:
        found = ask(client, *texts)
    assert found["place_id"].notna().sum() == 5
    # Five starts at 10 per second span 0.4 s; arrival times at the server carry some
    # network jitter, so the bound has slack (the spacing itself is tested below).
    starts = sorted(service.times)
    assert len(starts) == 5 and starts[-1] - starts[0] >= 0.3


def test_rate_limit_spaces_starts_without_a_server() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)

    limit = RateLimit(4.0, clock=lambda: now[0], sleep=sleep)
    for _ in range(3):
        limit.wait()
    assert slept == [0.25, 0.5]
    with pytest.raises(OptionError, match="rate is 0"):
        RateLimit(0)


def test_empty_and_missing_queries_are_not_sent(url: str, service: GeocodingService) -> None:
    with geocoder(url) as client:
        found = client.geocode(pd.Series(["", None, "  "], dtype=object), {})
    assert found["err"].tolist() == ["the query is empty"] * 3
    assert service.params == []


def test_urls_never_show_their_query_or_credentials(url: str) -> None:
    secret_url = url.replace("http://", "http://user:hunter2@") + "/?api_key=SECRET123"
    with geocoder(secret_url) as client:
        found = ask(client, "Nowhere at all")
    assert "SECRET123" not in client.source and "hunter2" not in client.source
    assert "SECRET123" not in found.loc[0, "err"]


@pytest.mark.parametrize(
    ("url", "protocol", "message"),
    [
        ("ftp://example.org", "nominatim", "must be http:// or https:// with a host"),
        ("http://", "nominatim", "must be http:// or https:// with a host"),
        ("http://example.org", "google", "geocoder protocol 'google'; allowed: nominatim, pelias"),
    ],
)
def test_bad_settings(url: str, protocol: str, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        HttpGeocoder(url, protocol)  # type: ignore[arg-type]


# --- configuration ----------------------------------------------------------------------


def write_config(tmp_path: Path, text: str) -> dict[str, str]:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return {"TOOLKIT_CONFIG": str(path)}


def test_config_top_level_table(tmp_path: Path) -> None:
    env = write_config(
        tmp_path,
        '[geocoder]\nurl = "https://geo.example.org"\nrate = 2\ntimeout = 4.5\nattempts = 5\n',
    )
    assert service_from_config(environ=env) == ServiceSettings(
        "https://geo.example.org", "nominatim", 2.0, 4.5, 5
    )


def test_config_profile_and_environment(tmp_path: Path) -> None:
    env = write_config(
        tmp_path,
        'default_profile = "staging"\n[geocoder]\nurl = "https://a.example.org"\n'
        '[profiles.staging]\nbase_url = "https://service.example.org"\n'
        'geocoder = "https://pelias.example.org/v1"\n'
        '[profiles.other]\nbase_url = "https://x.example.org"\n',
    )
    chosen = service_from_config(environ=env)
    assert chosen is not None and (chosen.url, chosen.protocol) == (
        "https://pelias.example.org/v1",
        "pelias",
    )
    # A profile without a geocoder falls back to the file's own table.
    other = service_from_config("other", environ=env)
    assert other is not None and other.url == "https://a.example.org"
    overridden = service_from_config(environ={**env, "TOOLKIT_GEOCODER": "http://localhost:8088"})
    assert overridden is not None and overridden.url == "http://localhost:8088"
    assert service_from_config(environ={"TOOLKIT_CONFIG": str(tmp_path / "none.toml")}) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[geocoder]\nurl = "https://a.example.org"\nspeed = 3\n', "unknown geocoder key"),
        ('[geocoder]\nurl = "https://a.example.org"\nrate = "fast"\n', "rate is 'fast'"),
        ('[geocoder]\nurl = "https://a.example.org"\nrate = 0\n', "rate_per_s is 0.0"),
        ('[geocoder]\nurl = "a.example.org"\n', "must be an http:// or https:// URL"),
        ("geocoder = 3\n", "geocoder must be a URL or a table"),
        ("[geocoder\n", "not a readable TOML config file"),
    ],
)
def test_bad_config(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        service_from_config(environ=write_config(tmp_path, text))
