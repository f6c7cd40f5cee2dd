"""The compiled half of the build: everything else (metadata, packages, the folder mapping) is
pyproject.toml's.

``pip install .`` / ``pip wheel .`` / a wheel built from the sdist compile the hot modules
(rmqd/_compiled.py MODULES) with Cython, through rmqd/_build.py: the same recipe and the same
content-keyed cache as scripts/build_ext, so a module already compiled on this machine is copied,
not compiled again. The result is a platform wheel (cp311-cp311-linux_x86_64). Where nothing can
be compiled (no Cython, no C compiler, no Python headers) or every module fails, the build says so
in one line and makes the pure-Python wheel instead: the install never fails for want of a
speed-up. ``RMQD_BUILD_EXT=0`` asks for that pure build on purpose (scripts/dev's editable
install, which leaves compiling to scripts/build_ext and its progress lines).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType

from setuptools import Extension, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def _load(name: str, path: Path) -> ModuleType:
    """rmqd's own files by path: the package itself is not importable while it is being built."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_compiled = _load("_rmqd_compiled", ROOT / "rmqd" / "_compiled.py")
_build = _load("_rmqd_build", ROOT / "rmqd" / "_build.py")
UNITS = {u.module: u for u in _build.units(ROOT, _compiled.MODULES)}


def _say(line: str) -> None:
    print(f"rmqd: {line}", file=sys.stderr, flush=True)


class optional_build_ext(build_ext):
    """Each extension from rmqd/_build.py's cache (compiled into it when missing); a module that
    cannot be compiled is left out, and runs as its plain-Python source."""

    def run(self) -> None:
        self._in_place = bool(self.inplace or self.editable_mode)  # run() clears inplace while it builds
        super().run()

    def build_extensions(self) -> None:
        reason = "RMQD_BUILD_EXT=0" if os.environ.get("RMQD_BUILD_EXT") == "0" else _build.why_not()
        built: dict[str, Path] = {}
        if reason is None:
            try:
                result = _build.build([UNITS[e.name] for e in self.extensions], progress=_say)
            except Exception as exc:  # noqa: BLE001 - a speed-up never fails the install
                reason = f"the build broke: {type(exc).__name__}: {exc}"
                result = _build.Result({}, {}, 0, None)
            built = result.built
            if result.failed:
                _say(_build.failure_line(result, len(self.extensions)))
                if not built:
                    reason = "every module failed to compile"
        for ext in list(self.extensions):
            dest = Path(self.get_ext_fullpath(ext.name))
            if ext.name in built:
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(built[ext.name], dest)
            else:
                dest.unlink(missing_ok=True)  # an earlier build's, left in build/lib
                self.extensions.remove(ext)
        if reason is not None:
            _say(f"building the plain-Python wheel: {reason} (rmqd runs the same source, only slower)")
        if not self._in_place:
            # The old in-place build (Cythonize -i, before rmqd/_build.py) left wire/, store/, ...
            # at the top of a checkout's build/lib*; the wheel takes all of build_lib, and installs
            # only `rmqd`
            for folder in {u.source.parent.name for u in UNITS.values()}:
                shutil.rmtree(Path(self.build_lib) / folder, ignore_errors=True)
            # what compiled_status() says when installed (rmqd/_compiled.py)
            note = Path(self.build_lib) / "rmqd" / _compiled.WHEEL_BUILD
            note.parent.mkdir(parents=True, exist_ok=True)
            note.write_text(f"plain Python: {reason}\n" if reason is not None else
                            f"compiled: {len(self.extensions)} of {len(UNITS)} modules\n")


class platform_or_pure_wheel(bdist_wheel):
    """A platform wheel when modules were compiled, else a pure one (py3-none-any): the tag is
    decided after the build, since only then is it known whether anything compiled."""

    def run_command(self, command: str) -> None:
        super().run_command(command)
        if command == "build" and not self.distribution.ext_modules:
            self.root_is_pure = True


setup(
    ext_modules=[Extension(u.module, [str(u.source.relative_to(ROOT))]) for u in UNITS.values()],
    cmdclass={"build_ext": optional_build_ext, "bdist_wheel": platform_or_pure_wheel},
)
