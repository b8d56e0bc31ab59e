"""The scaling planner behind ``ringleader plan``: predict a data-parallel job's step
time, throughput and efficiency on 1..N ranks from its compute time, its gradient
bytes and the link (``model``), with the figures measured here (``measure``), what a
communication mode does to them and which to recommend (``modes``), and a chart
(``chart``). The launch plan (who runs where) is ``ringleader.launch.plan``.
"""
