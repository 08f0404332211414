"""ROS parameters generated from config dataclasses: one source for defaults and descriptions."""
from dataclasses import dataclass, fields

import pytest

from vam_model.backends.base import BackendConfig
from vam_model.guidance import GuidanceConfig
from vam_model.policy import PolicyConfig
from vam_control.runtime import RuntimeConfig
from vam_stack import ros
from vam_stack.config import ConfigError, field_docs


@dataclass(frozen=True)
class _Commented:
    rate_hz: float = 30.0   # how often [Hz]
    mode: str = "hold"      # hold | stop
                            # (a second comment line continues the first)
    flag: bool = False      # a switch


@dataclass(frozen=True)
class _Silent:
    rate_hz: float = 30.0   # how often [Hz]
    mode: str = "hold"


def test_field_docs_reads_each_fields_comment_and_its_continuation():
    assert field_docs(_Commented) == {"rate_hz": "how often [Hz]",
                                      "mode": "hold | stop (a second comment line continues the first)",
                                      "flag": "a switch"}


def test_a_field_without_a_comment_is_an_error_naming_it():
    with pytest.raises(ConfigError, match=r"_Silent.*\['mode'\]"):
        field_docs(_Silent)


def test_params_take_default_description_and_mutability_from_the_dataclass():
    ps = {p.name: p for p in ros.params_from(_Commented, ("rate_hz", "mode"), rename={"mode": "on_fault"},
                                              choices={"mode": ("hold", "stop")}, ranges={"rate_hz": (1.0, 100.0)},
                                              live=("rate_hz",))}
    assert ps["rate_hz"].default == 30.0 and ps["rate_hz"].range == (1.0, 100.0) and not ps["rate_hz"].read_only
    assert ps["rate_hz"].description.startswith("how often [Hz]")
    assert ps["on_fault"].default == "hold" and ps["on_fault"].choices == ("hold", "stop") and ps["on_fault"].read_only


@pytest.mark.parametrize("kwargs", [{"names": ("nope",)}, {"names": ("mode",), "ranges": {"rate_hz": (0, 1)}}])
def test_params_from_refuses_fields_it_does_not_generate(kwargs):
    names = kwargs.pop("names")
    with pytest.raises(ValueError, match="unknown or unselected"):
        ros.params_from(_Commented, names, **kwargs)


def test_the_policy_nodes_generated_parameters_carry_the_config_defaults():
    """Every parameter of vam_policy_node that a config dataclass owns has that dataclass's
    default: a changed default moves the ROS parameter with it."""
    from vam_policy_node.params import PARAMS

    by_name = {p.name: p for p in PARAMS}
    owners = {"guidance": (GuidanceConfig, "schedule"), "backend": (BackendConfig, "name"),
              "backend_precision": (BackendConfig, "precision")}
    for cls in (GuidanceConfig, PolicyConfig, RuntimeConfig):
        for f in fields(cls):
            if f.name in by_name and f.name not in owners:
                owners[f.name] = (cls, f.name)
    assert len(owners) >= 14
    for pname, (cls, fname) in owners.items():
        default = {f.name: f.default for f in fields(cls)}[fname]
        if pname == "backend":   # the one documented exception: `auto`, resolved per device (onnxruntime on a CPU)
            assert by_name[pname].default == "auto" and default in by_name[pname].choices, by_name[pname]
        else:
            assert by_name[pname].default == default, pname
        assert field_docs(cls)[fname] in by_name[pname].description, pname
