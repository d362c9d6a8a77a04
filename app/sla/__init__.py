"""SLA rules and renderers, pure: objectives and their evaluation at pi0
(:mod:`~app.sla.objectives`), and the report as an HTML page
(:mod:`~app.sla.html`) or a CSV (:mod:`~app.sla.csv`), rendered from the
report's JSON documents. The report itself is read by :mod:`app.services.read.sla_report`."""
