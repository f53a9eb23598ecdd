"""Variants defined outside the repository: plugins imported before the registry is read.

A plugin is a Python module that registers variants (suite.registry.register_kernel) when imported,
usually with its kernel module and ``.cu`` file beside it. Two ways in:

* ``--plugin MODULE`` on ``python -m suite.run`` and ``python -m suite.sanitize`` (repeatable): a dotted module name
  importable from here, or the path of a ``.py`` file (its directory is put on sys.path first, as ``python FILE``
  would, so that it can import its siblings);
* an installed distribution's entry point in the group ``pipesuite.variants`` (``[project.entry-points."pipesuite.
  variants"] mine = "my_package.variants"``), loaded the first time the registry is read.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ENTRY_POINT_GROUP = "pipesuite.variants"
_entry_points_loaded = False


class PluginError(RuntimeError):
    """A plugin could not be found or failed while importing (its own error is chained)."""


def load_plugin(spec: str) -> ModuleType:
    """Import one plugin, by dotted module name or by ``.py`` path. Loading the same plugin again is a no-op."""
    import suite.registry

    suite.registry.variants()  # the suite's own registrations first: the tables list them before a plugin's
    path = Path(spec)
    try:
        if spec.endswith(".py") or path.is_file():
            return _load_file(path)
        return importlib.import_module(spec)
    except PluginError:
        raise
    except Exception as e:  # an ImportError, or whatever the plugin's own code raised: name the plugin
        raise PluginError(f"plugin {spec!r} failed to import: {type(e).__name__}: {e}") from e


def load_plugins(specs) -> list[ModuleType]:
    return [load_plugin(spec) for spec in specs or ()]


def _load_file(path: Path) -> ModuleType:
    path = path.resolve()
    if not path.is_file():
        raise PluginError(f"plugin file {path} does not exist")
    name = f"pipesuite_plugin_{path.stem}"
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path):
        return sys.modules[name]
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_entry_points() -> None:
    """Import every installed ``pipesuite.variants`` entry point, once."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as e:
            raise PluginError(f"entry point {ep.name!r} = {ep.value!r} ({ENTRY_POINT_GROUP}) failed to import: "
                              f"{type(e).__name__}: {e}") from e
