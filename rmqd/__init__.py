"""rmqd: a drop-in broker for Apache RocketMQ clients, written in Python.

Installed, every part of rmqd lives under this one package: ``rmqd.wire`` (sans-IO codecs),
``rmqd.store`` (RocketMQ's files), ``rmqd.processors`` (request handling), ``rmqd.broker``
(process assembly and the ``rmqd`` command) and ``rmqd.spark`` (PySpark jobs). The repository
keeps those folders at its root; pyproject.toml maps them under this name, so nothing else
reaches site-packages.
"""

from __future__ import annotations

from importlib import metadata as _metadata

try:
    from rmqd import _compiled
except ImportError:  # the PySpark --py-files zip ships this file alone: nothing there is compiled
    pass
else:
    _compiled.install()  # a compiled hot module runs only while it is newer than its source

try:
    __version__ = _metadata.version("rmqd")
except _metadata.PackageNotFoundError:  # run from a zip shipped with --py-files, not installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
