# Run silently in every Python kernel the code-interpreter service starts, before any
# client code (code_interpreter.py sends it as a silent execute_request). It adds two
# display formats that the service turns into a result's `chart` and `data` fields, and the
# helpers that apply a run's env_vars around that run only. Everything it defines lives in
# one module, `_cell_interp`, so the user's namespace stays empty.
def _cell_interp_setup():
    import math
    import os
    import sys
    import types

    mod = types.ModuleType("_cell_interp")
    sys.modules["_cell_interp"] = mod

    saved = {}

    def set_env(values):
        # Remember what each variable was (None: unset) so restore_env puts it back.
        for k, v in values.items():
            if k not in saved:
                saved[k] = os.environ.get(k)
            os.environ[k] = v

    def restore_env():
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        saved.clear()

    mod.set_env = set_env
    mod.restore_env = restore_env

    # A run's stdout and stderr are bounded here, where they are written: past the limit
    # the text is dropped before it becomes a message, so printing 100 MB costs neither
    # this kernel's memory nor the service's, and the code runs on. The service keeps the
    # same bound on what it forwards (and says so the same way).
    out = {"limit": None, "used": 0, "noted": False}

    def set_output_limit(n):
        out["limit"] = int(n)

    def reset_output(*_):
        out["used"] = 0
        out["noted"] = False

    def bounded(stream, notice_to):
        orig = stream.write

        def write(text):
            n = out["limit"]
            if n is None or not isinstance(text, str):
                return orig(text)
            left = n - out["used"]
            if left <= 0:
                dropped = text
            else:
                raw = text.encode("utf-8", "surrogatepass")
                out["used"] += len(raw)
                if len(raw) <= left:
                    return orig(text)
                orig(raw[:left].decode("utf-8", "ignore"))
                dropped = text
            if not out["noted"]:
                out["noted"] = True
                notice_to(
                    f"\n[cell: this run's output passed {n} bytes; the rest is dropped, "
                    f"the code keeps running]\n"
                )
            return len(dropped)

        return orig, write

    mod.set_output_limit = set_output_limit
    mod.reset_output = reset_output
    if hasattr(sys.stdout, "write") and hasattr(sys.stderr, "write"):
        err_orig = sys.stderr.write
        _, out_write = bounded(sys.stdout, err_orig)
        _, err_write = bounded(sys.stderr, err_orig)
        sys.stdout.write = out_write
        sys.stderr.write = err_write

    def num(v):
        # JSON has no NaN or infinity: they become null.
        try:
            f = float(v)
        except (TypeError, ValueError):
            return str(v)
        return f if math.isfinite(f) else None

    def clean(v):
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            return v
        try:
            import numpy

            if isinstance(v, numpy.generic):
                v = v.item()
                if isinstance(v, (bool, int, str)):
                    return v
        except ImportError:
            pass
        if isinstance(v, float):
            return v if math.isfinite(v) else None
        if hasattr(v, "isoformat"):
            return v.isoformat()
        return str(v)

    mod.clean = clean

    # ---- charts: what a matplotlib figure shows, in the shapes E2B's SDKs read ----

    def axis_scale(ax, which):
        axis = ax.xaxis if which == "x" else ax.yaxis
        try:
            import matplotlib.dates as mdates
            import matplotlib.category as mcat

            conv = axis.get_converter() if hasattr(axis, "get_converter") else axis.converter
            if isinstance(conv, mdates.DateConverter) or isinstance(
                conv, getattr(mdates, "_SwitchableDateConverter", ())
            ):
                return "datetime"
            if isinstance(conv, mcat.StrCategoryConverter):
                return "categorical"
        except Exception:
            pass
        return ax.get_xscale() if which == "x" else ax.get_yscale()

    def value(v, scale, axis):
        if scale == "datetime":
            try:
                import matplotlib.dates as mdates

                return mdates.num2date(float(v)).isoformat()
            except Exception:
                return str(v)
        if scale == "categorical":
            try:
                mapping = axis.units._mapping if axis.units is not None else {}
                for label, pos in mapping.items():
                    if pos == v:
                        return str(label)
            except Exception:
                pass
        return num(v)

    def labels_2d(ax, chart):
        import re

        chart["x_label"] = ax.get_xlabel() or None
        chart["y_label"] = ax.get_ylabel() or None
        for k in ("x", "y"):
            label = chart[k + "_label"]
            m = re.search(r"\s\((.*?)\)|\[(.*?)\]", label) if label else None
            chart[k + "_unit"] = (m.group(1) or m.group(2)) if m else None

    def ticks(ax, chart):
        for k, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            scale = axis_scale(ax, k)
            locs = list(ax.get_xticks() if k == "x" else ax.get_yticks())
            chart[k + "_ticks"] = [value(t, scale, axis) for t in locs]
            chart[k + "_tick_labels"] = [
                t.get_text() for t in (ax.get_xticklabels() if k == "x" else ax.get_yticklabels())
            ]
            chart[k + "_scale"] = scale

    def kind(ax):
        from matplotlib.collections import PathCollection
        from matplotlib.lines import Line2D
        from matplotlib.patches import PathPatch, Rectangle, Wedge
        from matplotlib.text import Text

        objs = [o for o in getattr(ax, "_children", ax.get_children()) if not isinstance(o, Text)]
        if not objs:
            return "unknown"
        if all(isinstance(o, Line2D) for o in objs):
            return "line"
        if all(isinstance(o, PathCollection) for o in objs):
            return "scatter"
        if all(isinstance(o, Wedge) for o in objs):
            return "pie"
        if all(isinstance(o, Rectangle) for o in objs):
            return "bar"
        if all(isinstance(o, (PathPatch, Line2D)) for o in objs):
            return "box_and_whisker"
        return "unknown"

    def chart_of_axes(ax):
        t = kind(ax)
        chart = {"type": t, "title": ax.get_title() or None, "elements": []}
        if t in ("line", "scatter"):
            labels_2d(ax, chart)
            ticks(ax, chart)
            xs, ys = chart["x_scale"], chart["y_scale"]
            if t == "line":
                for line in ax.get_lines():
                    pts = [
                        [value(x, xs, ax.xaxis), value(y, ys, ax.yaxis)]
                        for x, y in zip(line.get_xdata(), line.get_ydata())
                    ]
                    chart["elements"].append({"label": str(line.get_label()), "points": pts})
            else:
                for coll in ax.collections:
                    pts = [
                        [value(x, xs, ax.xaxis), value(y, ys, ax.yaxis)]
                        for x, y in coll.get_offsets()
                    ]
                    chart["elements"].append({"label": str(coll.get_label()), "points": pts})
        elif t == "bar":
            labels_2d(ax, chart)
            for cont in ax.containers:
                rects = list(cont)
                if not rects:
                    continue
                horizontal = getattr(cont, "orientation", "vertical") == "horizontal"
                if horizontal:
                    tl = {round(t, 6): l.get_text() for t, l in zip(ax.get_yticks(), ax.get_yticklabels())}
                else:
                    tl = {round(t, 6): l.get_text() for t, l in zip(ax.get_xticks(), ax.get_xticklabels())}
                group = str(cont.get_label()) if cont.get_label() else ""
                if group.startswith("_container") and group[10:].isdigit():
                    group = f"Group {int(group[10:])}"  # as E2B names an unlabelled one
                elif group.startswith("_"):
                    group = ""
                for r in rects:
                    if horizontal:
                        pos = r.get_y() + r.get_height() / 2
                        v = r.get_width()
                    else:
                        pos = r.get_x() + r.get_width() / 2
                        v = r.get_height()
                    label = tl.get(round(pos, 6), str(num(pos)))
                    chart["elements"].append({"label": label, "value": num(v), "group": group})
            if any(getattr(c, "orientation", "vertical") == "horizontal" for c in ax.containers):
                chart["x_label"], chart["y_label"] = chart["y_label"], chart["x_label"]
                chart["x_unit"], chart["y_unit"] = chart["y_unit"], chart["x_unit"]
        elif t == "pie":
            for w in ax.patches:
                chart["elements"].append(
                    {
                        "label": str(w.get_label()),
                        "angle": num(abs(round(w.theta2 - w.theta1, 4))),
                        "radius": num(w.r),
                    }
                )
        elif t == "box_and_whisker":
            labels_2d(ax, chart)
            chart["elements"] = boxes(ax)
        return chart

    def boxes(ax):
        # A boxplot draws each box as a patch and its whiskers, caps, median and fliers
        # as lines; read the numbers back from the box's own statistics where kept.
        out = []
        names = [l.get_text() for l in ax.get_xticklabels()]
        import numpy as np

        i = 0
        for patch in ax.patches:
            v = patch.get_path().vertices
            lo, hi = float(np.min(v[:, 1])), float(np.max(v[:, 1]))
            x0, x1 = float(np.min(v[:, 0])), float(np.max(v[:, 0]))
            med = lo
            wl, wh = lo, hi
            fl = []
            for line in ax.lines:
                xd, yd = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
                if len(xd) == 0 or not (x0 - 1e-9 <= float(np.mean(xd)) <= x1 + 1e-9):
                    continue
                if line.get_linestyle() == "None":
                    fl += [num(y) for y in yd]
                elif len(yd) == 2 and yd[0] == yd[1] and lo <= yd[0] <= hi and len(xd) == 2 and xd[0] != xd[1] and (x1 - x0) - abs(xd[1] - xd[0]) < 1e-9:
                    med = float(yd[0])
                elif len(yd) == 2 and yd[0] != yd[1]:
                    wl, wh = min(wl, float(yd.min())), max(wh, float(yd.max()))
            out.append(
                {
                    "label": names[i] if i < len(names) else str(i + 1),
                    "min": num(wl),
                    "first_quartile": num(lo),
                    "median": num(med),
                    "third_quartile": num(hi),
                    "max": num(wh),
                    "outliers": fl,
                }
            )
            i += 1
        return out

    def chart_of_figure(fig):
        axes = fig.get_axes()
        if not axes:
            return None
        labels = [t.get_text() for a in axes for t in a.get_xticklabels()]
        if not any(labels):
            fig.canvas.draw()  # tick labels exist only once the figure was drawn
        if len(axes) == 1:
            return clean(chart_of_axes(axes[0]))
        title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else None
        return clean({"type": "superchart", "title": title, "elements": [chart_of_axes(a) for a in axes]})

    mod.chart_of_figure = chart_of_figure

    try:
        import IPython
        from IPython.core.formatters import BaseFormatter
        from traitlets import ObjectName, Unicode
    except ImportError:
        return
    ip = IPython.get_ipython()
    if ip is None:
        return

    class ChartFormatter(BaseFormatter):
        format_type = Unicode("application/vnd.cell.chart+json")
        print_method = ObjectName("_repr_cell_chart_")
        _return_type = (dict,)

        def __call__(self, obj):
            try:
                from matplotlib.figure import Figure
            except ImportError:
                return None
            if isinstance(obj, Figure):
                try:
                    return chart_of_figure(obj)
                except Exception:
                    return None  # a chart it cannot read still comes back as PNG
            return None

    # A DataFrame's columns as lists, up to DATA_CELLS cells (its HTML and text are
    # pandas' own, truncated as pandas truncates them).
    DATA_CELLS = 10000

    class DataFormatter(BaseFormatter):
        format_type = Unicode("application/vnd.cell.data+json")
        print_method = ObjectName("_repr_cell_data_")
        _return_type = (dict,)

        def __call__(self, obj):
            mod_pd = sys.modules.get("pandas")
            if mod_pd is None or not isinstance(obj, mod_pd.DataFrame):
                return None
            if obj.size > DATA_CELLS:
                return None
            try:
                return clean(obj.to_dict(orient="list"))
            except Exception:
                return None

    # An image saved to a path is shown too: as in E2B's template, code that saves a picture
    # with PIL gets it back as a result. Patched when PIL.Image is first imported (a loader
    # around its own), so a kernel that never uses PIL pays nothing at its start.
    def patch_pil(image_mod):
        original_save = image_mod.Image.save

        def save(image, fp, format=None, **options):
            if isinstance(fp, (str, os.PathLike)):
                from IPython.display import display

                display(image)
            return original_save(image, fp, format, **options)

        image_mod.Image.save = save

    import importlib.abc

    class PILHook(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name != "PIL.Image":
                return None
            spec = None
            for finder in sys.meta_path:
                if finder is not self and hasattr(finder, "find_spec"):
                    spec = finder.find_spec(name, path, target)
                    if spec:
                        break
            if spec is None or spec.loader is None:
                return spec
            inner = spec.loader

            class Loader(importlib.abc.Loader):
                def create_module(self, s):
                    return inner.create_module(s)

                def exec_module(self, module):
                    inner.exec_module(module)
                    patch_pil(module)

            spec.loader = Loader()
            return spec

    if "PIL.Image" in sys.modules:
        patch_pil(sys.modules["PIL.Image"])
    else:
        sys.meta_path.insert(0, PILHook())

    ip.events.register("pre_run_cell", reset_output)
    fm = ip.display_formatter.formatters
    fm["application/vnd.cell.chart+json"] = ChartFormatter(parent=ip.display_formatter)
    fm["application/vnd.cell.data+json"] = DataFormatter(parent=ip.display_formatter)


_cell_interp_setup()
del _cell_interp_setup
