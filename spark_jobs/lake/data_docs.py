"""Great Expectations' Data Docs without the internet: the pages' CDN assets served locally.

Data Docs pages load Bootstrap, bootstrap-table, jQuery, Vega and Font Awesome from public
CDNs, and their logo from a Great Expectations bucket with the data context's id in the
address. On a cluster without internet the pages are unstyled and their tables empty, and a
page opened anywhere tells a vendor it was. So:

- ``make setup`` resolves the assets once, from one pinned list
  (``spark_jobs/lake/data_docs_assets.json``: npm tarballs with their registry integrity) into
  ``.web/data-docs`` (``$S3TM_WEB_ASSETS_DIR`` elsewhere, as in the image);
- after each validation, :func:`localize` copies them beside the pages
  (``static/vendor/``) and points every page at its local copies (and the logo at the one
  Great Expectations ships in ``static/images/``). A page that still names an address off
  the site fails the step, saying which.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from core.errors import InputDataError
from spark_jobs.settings import env_name, settings

REPO = Path(__file__).resolve().parents[2]
ASSET_LIST = Path(__file__).with_name("data_docs_assets.json")  # package data: read at run time
ASSETS_DIR_ENV = env_name("web_assets_dir")
REGISTRY = os.environ.get("NPM_CONFIG_REGISTRY", "https://registry.npmjs.org").rstrip("/")
VENDOR = "static/vendor"
# Great Expectations' logo, with the data context's id as a query (add_data_context_id_to_url)
_LOGO = re.compile(
    r"https://great-expectations-web-assets\.s3[^\"']*/([\w.-]+\.(?:png|svg))[^\"']*"
)
# what a page loads: src= and href= of script, link and img tags
_REMOTE = re.compile(r"""<(?:script|link|img)\b[^>]*?\b(?:src|href)=["'](https?://[^"']+)["']""")
_SRI = re.compile(r"""\s+(?:integrity|crossorigin)=["'][^"']*["']""")


@dataclass(frozen=True)
class AssetList:
    """The pinned list: packages (name -> version, integrity), CDN address -> package file,
    and folders copied whole (the fonts a style sheet loads relative to itself)."""

    packages: dict[str, dict[str, str]]
    urls: dict[str, str]
    folders: list[str]

    @classmethod
    def load(cls, path: Path = ASSET_LIST) -> AssetList:
        data = json.loads(path.read_text())
        return cls(dict(data["packages"]), dict(data["urls"]), list(data.get("folders", {})))

    def package_of(self, file: str) -> str:
        """The package a file path (``<package>/<path in it>``) belongs to."""
        for name in sorted(self.packages, key=len, reverse=True):
            if file.startswith(name + "/"):
                return name
        raise InputDataError(f"{file} names no package of {ASSET_LIST.name}")


def assets_dir() -> Path:
    """Where ``make setup`` put the assets (``$S3TM_WEB_ASSETS_DIR``, else ``.web/data-docs``)."""
    return settings().web_assets_dir


def _tarball_url(name: str, version: str) -> str:
    return f"{REGISTRY}/{name}/-/{name.rsplit('/', 1)[-1]}-{version}.tgz"


def _check_integrity(data: bytes, integrity: str, what: str) -> None:
    algorithm, _, expected = integrity.partition("-")
    digest = base64.b64encode(hashlib.new(algorithm, data).digest()).decode()
    if digest != expected:
        raise InputDataError(
            f"{what}: integrity {algorithm}-{digest} is not the pinned {integrity}"
        )


def resolve(into: Path | None = None, assets: AssetList | None = None) -> Path:
    """Downloads each pinned package once, checks its integrity and unpacks the files the
    pages need into ``into`` (default :func:`assets_dir`); returns it.

    Raises:
        InputDataError: a download failed (with the registry's error) or a tarball is not
            the pinned one.
    """
    into = into or assets_dir()
    assets = assets or AssetList.load()
    wanted = [*assets.urls.values(), *assets.folders]
    staging = into.with_name(into.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    for name, pin in sorted(assets.packages.items()):
        url = _tarball_url(name, pin["version"])
        try:
            with urllib.request.urlopen(url, timeout=120) as response:
                data = response.read()
        except OSError as err:
            raise InputDataError(f"could not download {url}: {err}") from err
        _check_integrity(data, pin["integrity"], f"{name}@{pin['version']}")
        mine = [w[len(name) + 1 :] for w in wanted if assets.package_of(w) == name]
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            for member in archive.getmembers():
                inside = member.name.split("/", 1)[-1]  # npm tarballs hold package/...
                if member.isfile() and any(inside == m or inside.startswith(m + "/") for m in mine):
                    target = staging / name / inside
                    target.parent.mkdir(parents=True, exist_ok=True)
                    source = archive.extractfile(member)
                    assert source is not None
                    target.write_bytes(source.read())
        print(f"  {name}@{pin['version']}: {len(mine)} file(s) or folder(s)", file=sys.stderr)
    missing = [w for w in wanted if not (staging / w).exists()]
    if missing:
        raise InputDataError(f"the pinned packages hold no {missing}")
    shutil.rmtree(into, ignore_errors=True)
    staging.replace(into)
    return into


def localize(site: Path, assets: AssetList | None = None, source: Path | None = None) -> int:
    """Points every page of the Data Docs site ``site`` at local copies of its assets
    (copied into ``site/static/vendor`` when missing); returns the pages rewritten.

    Raises:
        InputDataError: the assets are not resolved here (run ``make setup``), or a page
            loads an address the pinned list does not cover.
    """
    assets = assets or AssetList.load()
    source = source or assets_dir()
    vendor = site / VENDOR
    needed = [*assets.urls.values(), *assets.folders]
    if not all((vendor / f).exists() for f in needed):
        if not all((source / f).exists() for f in needed):
            raise InputDataError(
                f"Data Docs assets are not resolved in {source}: run `make setup` (it "
                f"fetches {ASSET_LIST.name}), or set {ASSETS_DIR_ENV}"
            )
        for file in needed:
            target = vendor / file
            target.parent.mkdir(parents=True, exist_ok=True)
            if (source / file).is_dir():
                shutil.copytree(source / file, target, dirs_exist_ok=True)
            else:
                shutil.copyfile(source / file, target)
    rewritten = 0
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        up = os.path.relpath(site, page.parent)
        local = text
        for url, file in assets.urls.items():
            local = local.replace(f'"{url}"', f'"{up}/{VENDOR}/{file}"')
        local = _LOGO.sub(rf"{up}/static/images/\1", local)
        # the subresource-integrity attributes pin the CDN's copy and make a file:// page
        # fetch in CORS mode (refused); the local copies were checked at set-up
        local = re.sub(
            r"<(script|link)\b[^>]*>",
            lambda m: _SRI.sub("", m.group(0)) if f"{VENDOR}/" in m.group(0) else m.group(0),
            local,
        )
        remote = sorted(set(_REMOTE.findall(local)))
        if remote:
            raise InputDataError(f"Data Docs page {page} loads {remote}: not in {ASSET_LIST.name}")
        if local != text:
            page.write_text(local, encoding="utf-8")
            rewritten += 1
    return rewritten


def main(argv: list[str] | None = None) -> int:
    """``python -m spark_jobs.lake.data_docs resolve [FOLDER]`` (make setup; the image)."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "resolve":
        print("usage: python -m spark_jobs.lake.data_docs resolve [FOLDER]", file=sys.stderr)
        return 2
    into = Path(args[1]) if len(args) > 1 else None
    try:
        print(f"resolving {ASSET_LIST.name} from {REGISTRY}", file=sys.stderr)
        print(resolve(into))
    except InputDataError as err:
        print(f"data docs assets: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
