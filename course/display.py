"""What the notebooks show: coloured rounds and sliders. The one module of the course that
imports IPython and ipywidgets, so that the models, the metrics and the benchmark load neither."""

import html

import ipywidgets as widgets
from IPython.display import HTML

from course.exercises.grading import autograding
from course.toys import COLOURS, letter, token_kinds


def show_rounds(generation, decode=letter):
    """Colour each token by how it was made; a dark bar closes each target call."""
    spans, kinds = [], token_kinds(generation)
    for token, kind in zip(generation.tokens, kinds, strict=True):
        text = html.escape(decode(token)).replace("\n", "↵")
        style = "padding:1px 3px;margin:1px;font-family:monospace;display:inline-block"
        style += f";background:{COLOURS[kind]}"
        spans.append(f'<span class="tok-{kind}" title="{kind}" style="{style}">{text}</span>')
        if kind != "accepted":
            spans.append('<span style="border-left:2px solid #555;margin:0 2px"></span>')
    shown = [k for k in COLOURS if k != "plain" or k in kinds]  # "plain" only where it occurs
    legend = " ".join(
        f'<span style="background:{COLOURS[k]};padding:1px 6px">{k}</span>' for k in shown
    )
    return HTML(f'<div style="line-height:2">{"".join(spans)}</div><div>{legend}</div>')


def slider(description, value, low, high, increment=None):
    """A slider that acts on release: whole numbers without an increment, else floats by one
    (ipywidgets calls it `step`; in the course a step is a model's one-token call)."""
    kind = widgets.IntSlider if increment is None else widgets.FloatSlider
    extra = {} if increment is None else {"step": increment}
    return kind(value=value, min=low, max=high, description=description, **extra,
                continuous_update=False, style={"description_width": "initial"})  # fmt: skip


def slider_panel(fn, controls):
    """The sliders (wrapping onto a second row if need be) above the live output of fn.

    Under nbgrader's autograder fn runs once, at the sliders' values, and no widget is built:
    there a live widget output now and then stalls the kernel until the cell times out."""
    if autograding():
        fn(**{name: w.value for name, w in controls.items()})
        return HTML("<i>The sliders are live when you run this notebook in JupyterLab.</i>")
    row = widgets.HBox(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap"))
    return widgets.VBox([row, widgets.interactive_output(fn, controls)])
