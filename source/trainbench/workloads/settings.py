"""The workloads' shape settings, declared once: every list of them elsewhere is derived from ``SETTINGS``.

A workload's descriptor gives each setting it has a default and bounds (``Param``); this module says what the setting
is across the suite: ModelConfig's field, the key of a descriptor's ``params`` and of a run header's ``params``
(``name``), its command-line option and help, its words in messages and table headers, its config-string token, how
a value of it reads in words, and what the suite does with it. Derived from here: ModelConfig's checks
(``config.PARAM_FIELDS``, ``PARAM_NAMES``), the command line's options (``cli.options``), a campaign matrix's axes,
defaults and config strings (``campaign.matrix``), what a run measured as the report ranks and draws it
(``report``), what a performance model fits over (``analysis.measurements``). A run's shape settings as run are
read once (``results.run_settings.settings_as_run``) and said in words once (``shape_words``).

Two flags say what a setting decides:

- ``shape``: what one sample is the size of (an image's side, a sequence's tokens). Shown in every config string;
  runs of different shapes measure different work, so they are never ranked against each other nor drawn on one
  figure. The number of classes is no shape: a campaign shows it only where it varies or differs from the default.
- ``modelled``: a performance model may fit over it, as over the batch size (``analysis.measurements.PARAMETERS``);
  a setting that is not is one of the settings that split the measurements into separate models.

Adding a setting: one entry at the end of ``SETTINGS``, a field of the same name in ``config.ModelConfig`` (None:
the workload's default), the ``Param`` in the descriptor of each workload that has it, and its builders reading
``model.param(name)``. ``tests/test_settings_declared.py`` holds the three together. Nothing here imports a
framework: this is the bottom layer, with the descriptors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

# How a value reads in words: ``phrase`` in the report's headlines, figure titles and comparisons ("64 px",
# "seq_len 128"); ``label`` in a run's label, the report's legends ("64px": written so since the first report);
# ``amount`` as what one sample holds, in input-bench's line ("64 px", "128 tokens"); ``title`` in the title of a
# run's own plots ("image 64px", as bench.sweep's shape_text writes it).
Form = Literal["phrase", "label", "amount", "title"]


@dataclass(frozen=True)
class Setting:
    """One shape setting. ``words`` names it in ModelConfig's messages and in table headers; ``option_help`` is what
    its command-line option sets, ``option_note`` what that help says before the workloads' defaults; ``metavar``
    its value in --help (None: argparse's own); ``prefix`` starts its token in a config string ("img" + 64);
    ``in_header``: a run's header repeats it at its top level (image_size, since the first format: an older file
    has it only there), else it is read from the header's ``params``."""

    name: str
    words: str
    option_help: str
    metavar: str | None
    prefix: str
    phrase: str
    label: str
    amount: str
    title: str
    shape: bool
    modelled: bool
    in_header: bool = False
    option_note: str = ""

    @property
    def option(self) -> str:
        """Its command-line option: ``--image-size`` (also the name config.py's refusals give it)."""
        return f"--{self.name.replace('_', '-')}"

    def text(self, value: Any, form: Form = "phrase") -> str:
        """A value in words, in one of the forms (``Form``)."""
        template: str = getattr(self, form)
        return template.format(value)


# In ModelConfig's field order (which is also the order its checks and refusals speak in).
SETTINGS: tuple[Setting, ...] = (
    Setting("image_size", "image size", "square input size", "PX", "img", phrase="{} px", label="{}px",
            amount="{} px", title="image {}px", shape=True, modelled=True, in_header=True),
    Setting("num_classes", "number of classes", "classifier outputs", None, "cls", phrase="num_classes {}",
            label="num_classes {}", amount="{} classes", title="num_classes {}", shape=False, modelled=False,
            option_note="with --data: the data's classes"),
    Setting("seq_len", "sequence length", "tokens per sequence", "N", "seq", phrase="seq_len {}", label="seq_len {}",
            amount="{} tokens", title="seq_len {}", shape=True, modelled=True),
)
NAMES: tuple[str, ...] = tuple(setting.name for setting in SETTINGS)
SHAPES: tuple[str, ...] = tuple(setting.name for setting in SETTINGS if setting.shape)
MODELLED: tuple[str, ...] = tuple(setting.name for setting in SETTINGS if setting.modelled)
_BY_NAME: dict[str, Setting] = {setting.name: setting for setting in SETTINGS}


def named(name: str) -> Setting:
    """The declaration of a setting, by its name (a KeyError for a name not declared: a programming error)."""
    return _BY_NAME[name]


def checked_bounds(name: str) -> tuple[int, int]:
    """The (minimum, maximum) a value of the setting is checked against before its workload is known (the command
    line's option, a campaign's axis): the default workload's where it has the setting (``config.MAX_IMAGE_SIZE``
    is ResNet-50's), else the widest any registered workload gives it. ModelConfig then checks the workload's own,
    naming it."""
    from trainbench import workloads  # the registry: this module is imported by the package's users, not by it

    default = workloads.get(workloads.DEFAULT)
    found = [default.params[name]] if name in default.params else \
        [workload.params[name] for workload in workloads.all_workloads() if name in workload.params]
    return min(param.minimum for param in found), max(param.maximum for param in found)


def shape_words(values: Mapping[str, Any], form: Form = "phrase") -> list[str]:
    """How a sample's shape is named: each shape setting ``values`` holds (not None), in words, in declaration
    order: ``["64 px"]``, ``["seq_len 128"]``; [] for none. A workload has one shape setting; callers that show one
    take the first, callers that describe a row join them."""
    return [named(name).text(values[name], form) for name in SHAPES if values.get(name) is not None]
