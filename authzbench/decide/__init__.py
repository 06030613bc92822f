"""`authzbench decide` (issue 66): the reader's target, the contenders measured at growing sizes, the needs
judged on the recorded data, projected only where the run could not reach, with the method's own error.

target.py   the reader's need, stated once (every default named)
project.py  each survivor's needs per stage from the stages' records, carried to the target size along a power
            law with the method's own error, and classified (meets / fails, measured or projected; unknown;
            undecided)
capacity.py cores, memory and disk per survivor at the target (the `plan` arithmetic), the hops a check takes
report.py   the decision report, reports/<decide-id>.md, from decide.json and the stages' results
The run side (plan, stages, pruning) and the judging side (needs, projection, the decision report) read the
same `Target`.
"""
