"""Packages of the dmlbook wheel; everything else is in pyproject.toml.

``configs/`` (the run configs that ``dmlbook train --config NAME`` finds by name) stays at the top
of the repository, where readers and the chapters refer to it, and is shipped inside the package
as ``dmlbook/configs/``: a mapping of a folder outside the package that pyproject.toml cannot
express. ``dmlbook.engine.config.CONFIG_DIR`` looks there first, then beside the package (a source
checkout or an editable install). ``tests/test_wheel.py`` installs the wheel in a clean
environment and trains with a shipped config by name.
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["dmlbook", "dmlbook.*"]), "dmlbook.configs"],
    package_dir={"dmlbook.configs": "configs"},
)
