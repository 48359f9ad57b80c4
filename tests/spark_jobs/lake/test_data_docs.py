"""Data Docs' CDN assets served locally (spark_jobs.lake.data_docs): the rewrite of a page,
and the refusals (an address the pinned list does not cover, assets not resolved, a tarball
that is not the pinned one). The pages in a browser without internet are
test_validation.py's."""

from __future__ import annotations

import base64
import hashlib

import pytest

from core.errors import InputDataError
from spark_jobs.lake.data_docs import VENDOR, AssetList, _check_integrity, localize

ASSETS = AssetList(
    packages={"jquery": {"version": "3.7.1", "integrity": "sha512-x"}},
    urls={"https://code.jquery.com/jquery-3.7.1.min.js": "jquery/dist/jquery.min.js"},
    folders=[],
)
LOGO = (
    "https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/logo-long.png"
    "?d=0c8a6c4e-2b7a-4b5e-9a59-1d1f00000000"
)


def _site(tmp_path, script: str):
    site = tmp_path / "site"
    page = site / "validations" / "suite" / "run.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<html><head>{script}</head><body><img src="{LOGO}" alt="logo"></body></html>')
    source = tmp_path / "assets" / "jquery" / "dist"
    source.mkdir(parents=True)
    (source / "jquery.min.js").write_text("/* jQuery */")
    return site, page


def test_a_page_loads_its_copies_from_beside_it(tmp_path):
    site, page = _site(
        tmp_path,
        '<script src="https://code.jquery.com/jquery-3.7.1.min.js" integrity="sha384-abc" '
        'crossorigin="anonymous"></script>',
    )
    assert localize(site, ASSETS, tmp_path / "assets") == 1
    text = page.read_text()
    assert f'src="../../{VENDOR}/jquery/dist/jquery.min.js"' in text
    assert "integrity" not in text and "crossorigin" not in text
    # the logo without the data context's id, from the images Great Expectations ships
    assert 'src="../../static/images/logo-long.png"' in text and "amazonaws" not in text
    assert (site / VENDOR / "jquery" / "dist" / "jquery.min.js").read_text() == "/* jQuery */"
    assert localize(site, ASSETS, tmp_path / "nowhere") == 0  # copied once; nothing left


def test_an_address_off_the_list_fails_saying_which(tmp_path):
    site, _ = _site(tmp_path, '<script src="https://cdn.example.org/new-widget.js"></script>')
    with pytest.raises(InputDataError, match=r"new-widget\.js"):
        localize(site, ASSETS, tmp_path / "assets")


def test_unresolved_assets_say_how_to_get_them(tmp_path):
    site, _ = _site(tmp_path, "")
    with pytest.raises(InputDataError, match="make setup"):
        localize(site, ASSETS, tmp_path / "nowhere")


def test_a_tarball_that_is_not_the_pinned_one_is_refused():
    data = b"package"
    pinned = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
    _check_integrity(data, pinned, "jquery@3.7.1")
    with pytest.raises(InputDataError, match="not the pinned"):
        _check_integrity(b"tampered", pinned, "jquery@3.7.1")


def test_every_pinned_address_names_a_pinned_package():
    assets = AssetList.load()
    for file in [*assets.urls.values(), *assets.folders]:
        assert assets.package_of(file) in assets.packages
    assert all(p["integrity"].startswith("sha512-") for p in assets.packages.values())
