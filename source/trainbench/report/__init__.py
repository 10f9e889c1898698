"""``trainbench report``'s page, the top of the layers: finding and reading everything under the folders
(``gather.py``, into ``found.py``'s records), the ranking of every measured setting (``ranking.py``), the page's
sections (``sections/``, one module each) and the page (``html.py``). It draws with ``trainbench.render``'s
primitives; nothing but the command (``cli/report_cmd.py``) and the demo imports it. Empty on purpose: pandas and
matplotlib load only when a report is made."""
