"""Fixtures shared by the tests of several ``dmlbook.data`` modules (each mirror file uses some).

Tiny benchmark copies in their official layouts (``official_layouts.py``), the eight images of the
image-cache tests (``image_files.py``) and Omniglot's small sets (``omniglot_files.py``), and a loopback HTTP server with a local file to
download (``http_files.py``).
"""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer

import pytest

from .http_files import PAYLOAD, Handler
from .image_files import SIZE, eight_images
from .official_layouts import (
    CARS_CLASSES,
    make_cars_folders,
    make_cars_mat,
    make_cub,
    make_inshop,
    make_sop,
)
from .omniglot_files import small_sets


@pytest.fixture
def cub_dir(tmp_path):
    return make_cub(tmp_path / "CUB_200_2011")


@pytest.fixture
def cars_mat_dir(tmp_path):
    root = tmp_path / "cars196"
    make_cars_mat(root, CARS_CLASSES)
    return root


@pytest.fixture
def cars_folder_dir(tmp_path):
    root = tmp_path / "cars_folders"
    make_cars_folders(root, CARS_CLASSES)
    return root


@pytest.fixture
def sop_dir(tmp_path):
    return make_sop(tmp_path / "Stanford_Online_Products")


@pytest.fixture
def inshop_dir(tmp_path):
    return make_inshop(tmp_path / "InShop")


@pytest.fixture
def images(tmp_path):
    """Eight images: landscape, portrait, square, grey, CMYK, PNG; two classes of four."""
    return eight_images(tmp_path / "data")


@pytest.fixture
def cached(images, tmp_path):
    return images.cached(SIZE, cache_dir=tmp_path / "cache", progress=False)


@pytest.fixture(scope="module")
def small_layout(tmp_path_factory):
    """Two small Omniglot sets (sharing the alphabet 'Latin') and two 3-way runs, as zip files."""
    return small_sets(tmp_path_factory.mktemp("omniglot_small"))


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.files = {"/data.bin": PAYLOAD}
    httpd.requests = []
    httpd.mode = "range"
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "source" / "data.bin"
    path.parent.mkdir()
    path.write_bytes(PAYLOAD)
    return path
