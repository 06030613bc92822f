"""`authzbench decide` (issue 66): the reader's target, the contenders measured at growing sizes, the needs
judged on the recorded data, projected only where the run could not reach, with the method's own error.

target.py  the reader's need, stated once (every default named)
The run side (plan, stages, pruning) and the judging side (needs, projection, the decision report) read the
same `Target`.
"""
