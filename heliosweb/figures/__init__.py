"""Pictures of jobs: one Plotly figure module per job kind, built on the server from a job's
stored result and events (`plotly.graph_objects`, so Plotly validates them), plus the exports
(CSV tables, Chrome traces) read from the same data. The browser draws what `/figures/` returns."""
