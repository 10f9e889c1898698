"""How the suite shows numbers, low in the layers so that every command can use it: the tables a command prints
and their number formats (``console.py``, ``readable.py``), the plots (``plot.py``, ``telemetry_plot.py``,
``model_plot.py``) and the HTML building blocks (``page.py``). It gathers nothing and knows no report: the report
page itself is ``trainbench.report``, at the top."""
