# JupyterLab on the book (`make lab`): the reader's file browser shows the chapters only.
# (`make lab` serves the reader's working copy, which tools/lab.py fills with chapters only; these
# globs matter when JupyterLab is started on book/ itself.)
#
# `make lab` puts this folder first on JUPYTER_CONFIG_PATH, so your own ~/.jupyter settings still
# win over it. The names below are the book's machinery beside the chapters in book/ (Jupyter
# Book's configuration and styles, the landing page it renders, nbval's sanitizer): they are
# hidden from the file browser only; the files stay where the tools read them, and can still be
# opened by path. tests/test_lab.py checks that the browser lists the chapters and nothing else.
c = get_config()  # noqa: F821 (provided by Jupyter when it loads this file)

c.ContentsManager.hide_globs.extend(
    ["_config.yml", "_toc.yml", "_static", "_build", "intro.md", "references.bib", "sanitize.cfg"]
)
