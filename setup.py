"""The wheel's packages: tta's own, and the repository's top-level conf/ shipped as tta/conf, so that a non-editable
install finds its configs (tta.utils.config.config_dir picks the folder; tests/test_install.py checks the wheel)."""

from setuptools import find_namespace_packages, setup

setup(packages=[*find_namespace_packages(include=["tta*"], exclude=["tta.conf*"]), "tta.conf"],
      package_dir={"tta.conf": "conf"})
