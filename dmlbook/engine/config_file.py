"""Reading a config file: YAML or TOML, UTF-8, by path or by a shipped config's bare name.

A config is read with the care of any input a user hands over: :func:`read_file` takes a
``.yaml``/``.yml``/``.toml`` file, or the bare name of a shipped config (:func:`find_config`,
:data:`CONFIG_DIR`), and refuses in one :class:`~dmlbook.engine.config_sections.ConfigError`
that names the file (and the line, for YAML) what PyYAML would accept silently or fail on with a
traceback (:func:`load_yaml`): aliases, a key given twice, nesting deeper than :data:`MAX_DEPTH`;
and a file that is not UTF-8 text (e.g. saved as UTF-16). :mod:`dmlbook.engine.config` checks
the values read.

Tests: ``tests/engine/test_config_file.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .config_sections import ConfigError

__all__ = ["CONFIG_DIR", "MAX_DEPTH", "find_config", "load_yaml", "read_file"]

#: The deepest nesting of lists and mappings a config file may have (a dmlbook config needs 4).
MAX_DEPTH = 32


def load_yaml(stream: Any, where: str) -> Any:
    """``yaml.safe_load`` that refuses what a config never needs, with a :class:`ConfigError`
    naming ``where`` (the file) and the line:

    * aliases (``*name``): an alias repeats a node without copying it, so a few lines of aliases
      to aliases describe 10^8 leaves that only expand when the config is written out
      (``--dry-run``, checkpoints): a "billion laughs";
    * a key given twice in one mapping (PyYAML keeps the last one silently: a second ``optim:``
      section would replace the first whole);
    * lists and mappings nested more than :data:`MAX_DEPTH` deep (PyYAML's composer recurses,
      and 1,000 levels end in a ``RecursionError``).
    """
    import yaml

    class _ConfigLoader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            if self.check_event(yaml.AliasEvent):
                raise ConfigError(
                    f"{where}, line {event.start_mark.line + 1}: the YAML alias *{event.anchor} is "
                    "not accepted in a config (aliases can expand without bound); write the "
                    "values out."
                )
            if not self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent):
                return super().compose_node(parent, index)  # a scalar: no deeper
            if self.depth >= MAX_DEPTH:
                raise ConfigError(
                    f"{where}, line {event.start_mark.line + 1}: lists and mappings are nested "
                    f"more than {MAX_DEPTH} levels deep; a config needs a few (section, key, "
                    "value)."
                )
            self.depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                line = key_node.start_mark.line + 1
                if key_node.tag.endswith(":merge"):
                    raise ConfigError(
                        f"{where}, line {line}: the YAML merge key << is not accepted in a config "
                        "(a key the mapping also gives would silently win over the merged one); "
                        "write the keys out."
                    )
                key = self.construct_object(key_node)
                if key in seen:
                    raise ConfigError(
                        f"{where}, line {line}: the key {key!r} is given twice in one mapping "
                        f"(first on line {seen[key]}); YAML would keep only the last one. "
                        "Delete or merge one of them."
                    )
                seen[key] = line
            return super().construct_mapping(node, deep)

    return yaml.load(stream, Loader=_ConfigLoader)  # noqa: S506 - a SafeLoader subclass


def _shipped_configs() -> Path:
    """Where the shipped configs are: inside an installed wheel, or beside the package's source.

    A wheel holds them as package data (``dmlbook/configs/``, mapped from the checkout's
    ``configs/`` by ``setup.py``); a source checkout or an editable install has ``configs/``
    beside the ``dmlbook`` folder.
    """
    package = Path(__file__).resolve().parents[1]
    installed = package / "configs"
    return installed if installed.is_dir() else package.parent / "configs"


#: The shipped configs, found by bare name (``--config ms_cub_bninception``).
CONFIG_DIR = _shipped_configs()


def find_config(path: str | Path) -> Path:
    """A config file: ``path`` itself, or the shipped ``<path>.yaml`` (:data:`CONFIG_DIR`) for a bare name.

    ``find_config("ms_cub_bninception")`` finds the shipped ``ms_cub_bninception.yaml`` from any
    working directory, in a source checkout and in an installed wheel alike.

    Raises
    ------
    ConfigError
        If neither exists, listing the shipped config names.
    """
    p = Path(path).expanduser()
    if p.is_file():
        return p
    if p.parent == Path(".") and not p.suffix and (CONFIG_DIR / f"{p.name}.yaml").is_file():
        return CONFIG_DIR / f"{p.name}.yaml"
    shipped = sorted(c.stem for c in CONFIG_DIR.glob("*.yaml")) if CONFIG_DIR.is_dir() else []
    listing = f" Shipped configs (by name): {', '.join(shipped)}." if shipped else ""
    raise ConfigError(f"config file {str(path)!r} does not exist.{listing}")


def read_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML (``.yaml``/``.yml``) or TOML (``.toml``) file into a dict.

    ``path`` may also be the bare name of a shipped config (see :func:`find_config`).
    """
    p = find_config(path)
    if p.suffix not in (".yaml", ".yml", ".toml"):
        raise ConfigError(f"config file {p} must end in .yaml, .yml or .toml.")
    try:
        text = p.read_bytes().decode("utf-8-sig")  # a byte-order mark (Notepad) is accepted
    except UnicodeDecodeError as err:
        utf16 = p.read_bytes()[:2] in (b"\xff\xfe", b"\xfe\xff")  # its byte-order mark
        why = "it is UTF-16" if utf16 else f"{err.reason} at byte {err.start:,}"
        raise ConfigError(
            f"config file {p} is not UTF-8 text ({why}); save it as UTF-8 (in most editors: "
            "Save As, encoding UTF-8)."
        ) from None
    if p.suffix == ".toml":
        try:
            import tomllib
        except ImportError:  # Python 3.10
            import tomli as tomllib  # type: ignore[no-redef]
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:  # duplicate keys included
            raise ConfigError(f"{p} is not valid TOML: {err}") from None
    import yaml

    try:
        values = load_yaml(text, str(p)) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{p} is not valid YAML: {err}") from err
    if not isinstance(values, dict):  # a list or a scalar: nothing a config or --set can use
        raise ConfigError(
            f"{p}: a config must be a mapping of sections, got {type(values).__name__}."
        )
    return values
