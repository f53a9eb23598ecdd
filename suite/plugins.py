"""Variants defined outside the repository: plugins imported before the registry is read.

A plugin is a Python module that registers variants (``register_kernel``, from suite.registry) when imported,
usually with its kernel module and ``.cu`` file beside it. Two ways in:

* ``--plugin MODULE`` on ``python -m suite.run`` and ``python -m suite.sanitize`` (repeatable): a dotted module name
  importable from here, or the path of a ``.py`` file (its directory is put on sys.path while it imports, as
  ``python FILE`` would, so that it can import its siblings, and taken off after: a file planted there later, such as
  a ``secrets.py``, never shadows a module the run imports). A plugin file or directory that others can write (group
  or others) is loaded with a warning: its code runs with the runner's rights.
* an installed distribution's entry point in the group ``pipesuite.variants`` (``[project.entry-points."pipesuite.
  variants"] mine = "my_package.variants"``), loaded the first time the registry is read, before any ``--plugin``.

Each plugin file is imported once, however it is named: a ``--plugin`` that is already loaded (by path, by module
name, or as an installed entry point) is not imported again. Whatever a plugin raises while it imports and
registers, ``SystemExit`` (a plugin that calls ``sys.exit``) included, becomes a PluginError naming the plugin: the
CLI says it in one line and exits 2, never 0 with nothing run. Only KeyboardInterrupt passes through. An entry
point that failed fails every later read of the registry too (it is never skipped silently).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import stat
import sys
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType

ENTRY_POINT_GROUP = "pipesuite.variants"
_entry_points_loaded = False
_entry_points_error: PluginError | None = None


class PluginError(RuntimeError):
    """A plugin could not be found or failed while importing (its own error is chained). ``source`` says where it
    came from, for the CLI's one line: '--plugin' or 'installed plugin'."""

    def __init__(self, message: str, source: str = "--plugin"):
        super().__init__(message)
        self.source = source


def _what_happened(e: BaseException) -> str:
    if isinstance(e, SystemExit):
        return f"SystemExit({e.code!r}): it called sys.exit() while importing"
    return f"{type(e).__name__}: {e}"


def _guarded(what: str, source: str, load):
    """``load()``, with anything it raises but KeyboardInterrupt (SystemExit included) as a PluginError."""
    try:
        return load()
    except (PluginError, KeyboardInterrupt):
        raise
    except BaseException as e:  # a plugin's sys.exit(0) must not end the run as a success
        raise PluginError(f"{what} failed to import: {_what_happened(e)}", source) from e


def _loaded_from(origin: str | Path | None) -> ModuleType | None:
    """The module already imported from the file ``origin``, under whatever name."""
    if not origin:
        return None
    try:
        target = Path(origin).resolve()
    except (OSError, RuntimeError):
        return None
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file:
            try:
                if Path(file).resolve() == target:
                    return module
            except (OSError, RuntimeError):
                continue
    return None


def _origin(module_name: str) -> str | None:
    """The file a dotted module name would be imported from (None when it cannot be found)."""
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.has_location else None


def load_plugin(spec: str) -> ModuleType:
    """Import one plugin, by dotted module name or by ``.py`` path, after the suite's own variants and the installed
    entry points. A plugin already loaded (under any name) is returned as it is."""
    load_builtin()  # the suite's own registrations, then the entry points: the tables list them first
    path = Path(spec)
    if spec.endswith(".py") or path.is_file() or "/" in spec or os.sep in spec:  # a path: no module name has a slash
        return _load_file(path, spec)

    def load():
        loaded = _loaded_from(_origin(spec))
        return loaded if loaded is not None else importlib.import_module(spec)

    return _guarded(f"plugin {spec!r}", "--plugin", load)


def load_plugins(specs) -> list[ModuleType]:
    """The suite's variants, the installed entry points, then each plugin of ``specs`` (each once)."""
    load_builtin()
    return [load_plugin(spec) for spec in specs or ()]


def _load_file(path: Path, spec: str) -> ModuleType:
    if path.suffix != ".py":  # the path as given: a link named .py to another file is a .py file here
        raise PluginError(f"plugin {spec} is not a .py file (a plugin is a Python file or a dotted module name)")
    path = path.resolve()
    if path.is_dir():
        raise PluginError(f"plugin {spec} is a directory, not a .py file")
    if not path.is_file():
        raise PluginError(f"plugin file {path} does not exist")
    loaded = _loaded_from(path)
    if loaded is not None:
        return loaded
    name = f"pipesuite_plugin_{path.stem}"
    for what, where in (("plugin file", path), ("plugin directory", path.parent)):
        if why := _writable_by_others(where):
            print(f"warning: {what} {where} is writable by {why}: its code runs with your rights", file=sys.stderr)
    # the loader named: a resolved link's target may have another suffix, which the default lookup would refuse
    module_spec = importlib.util.spec_from_file_location(name, path, loader=SourceFileLoader(name, str(path)))
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module

    def load():
        added = str(path.parent) not in sys.path
        if added:  # only while it imports: its siblings, not a file planted beside it later, are found through it
            sys.path.insert(0, str(path.parent))
        try:
            module_spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        finally:
            if added and str(path.parent) in sys.path:
                sys.path.remove(str(path.parent))
        return module

    return _guarded(f"plugin {spec!r}", "--plugin", load)


def load_builtin() -> None:
    """The suite's own registrations (suite.variants), then the installed entry points (each once)."""
    import suite.variants  # noqa: F401  (the registrations)

    load_entry_points()


def _writable_by_others(path: Path) -> str | None:
    """'group', 'others' or 'group and others' when they can write ``path`` (as suite.nvrtc.cache checks its own)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    writers = [who for who, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH)) if mode & bit]
    return f"{' and '.join(writers)} (mode {stat.S_IMODE(mode):o})" if writers else None


def load_entry_points() -> None:
    """Import every installed ``pipesuite.variants`` entry point, once. One that fails raises PluginError, now and
    on every later call."""
    global _entry_points_loaded, _entry_points_error
    if _entry_points_error is not None:
        raise _entry_points_error
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        what = f"entry point {ep.name!r} = {ep.value!r} ({ENTRY_POINT_GROUP})"
        try:
            _guarded(what, "installed plugin", ep.load)
        except PluginError as e:
            _entry_points_error = e
            raise
