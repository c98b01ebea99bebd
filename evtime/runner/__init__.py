"""The runner: what every command does around its operator, below the command line.

Read the inputs and start Spark (:mod:`.inputs`), decide where the rows are read and written
(:mod:`.driver`), check and write the outputs (:mod:`.outputs`, :mod:`.publish`), commit
``--state`` (:mod:`.state`) and summarise (:mod:`.summary`).  One run's facts live in a
:class:`~evtime.runner.context.RunContext` that :func:`~evtime.runner.inputs.start` fills: the
runner keeps no state between runs.  It never imports :mod:`evtime.cli`."""
