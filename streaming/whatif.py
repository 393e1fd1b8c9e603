"""What-if variants of the settings: `--what-if rules.replica_lag_time_max_ms=10000`.

One variant is one or more `section.field=value` assignments (comma-separated), validated by the
same strict settings models as everything else: an unknown setting or a bad value is an error
that names it. Variant 0 is always the actual settings.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from replmon.state.monitor import MonitorConfig
from replmon.streaming.settings import Settings, SettingsError

# Sections that change what the rules decide; the others (kafka, redis, spark, ...) cannot
# differ between variants of one pass.
WHAT_IF_SECTIONS = ("rules", "alerts", "stream")
# A metadata event may carry the partition's own value of these (a topic-level override); a
# variant that sets one means "what if the cluster had been configured so", so the override in
# the events is ignored for it.
PER_PARTITION = {
    "rules.replica_lag_time_max_ms": "replica_lag_time_max_ms",
    "rules.min_insync_replicas": "min_insync_replicas",
}


@dataclass(frozen=True)
class Variant:
    variant_id: int
    name: str  # "actual" or the what-if text
    config: MonitorConfig
    ignore_event_fields: tuple  # per-partition overrides this variant replaces


def parse_assignments(text: str) -> list[tuple[str, str, str]]:
    """'rules.rule_set=v0_8,alerts.hw_stall_ms=5000' -> [(section, field, value), ...]."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        section, dot, field = key.strip().partition(".")
        if not sep or not dot or not field or not value.strip():
            raise SettingsError(
                f"replmon: --what-if {text!r}: expected section.setting=value, "
                "e.g. rules.replica_lag_time_max_ms=10000"
            )
        if section not in WHAT_IF_SECTIONS:
            raise SettingsError(
                f"replmon: --what-if {key.strip()}: only {', '.join(WHAT_IF_SECTIONS)} "
                "settings can differ between variants"
            )
        out.append((section, field.strip(), value.strip()))
    if not out:
        raise SettingsError(f"replmon: --what-if {text!r}: no setting given")
    return out


def apply_what_if(settings: Settings, text: str) -> Settings:
    """A copy of `settings` with the assignments validated and applied."""
    updates: dict[str, dict] = {}
    for section, field, value in parse_assignments(text):
        updates.setdefault(section, {})[field] = value
    changed = {}
    for section, fields in updates.items():
        model = getattr(settings, section)
        try:
            changed[section] = type(model).model_validate({**model.model_dump(), **fields})
        except ValidationError as exc:
            lines = [f"  {section}.{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()]
            raise SettingsError(
                f"replmon: --what-if {text!r}: invalid setting\n" + "\n".join(lines)
            ) from None
    return settings.model_copy(update=changed)


def build_variants(settings: Settings, what_ifs: list[str]) -> list[Variant]:
    variants = [Variant(0, "actual", settings.monitor_config(), ())]
    for i, text in enumerate(what_ifs, start=1):
        keys = {f"{s}.{f}" for s, f, _ in parse_assignments(text)}
        ignored = tuple(sorted(PER_PARTITION[k] for k in keys if k in PER_PARTITION))
        variants.append(Variant(i, text, apply_what_if(settings, text).monitor_config(), ignored))
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise SettingsError("replmon: the same --what-if is given twice")
    return variants
