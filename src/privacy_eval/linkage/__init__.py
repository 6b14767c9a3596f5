"""The linkage (re-identification) attack, on Spark: how often an attacker holding the
original records finds, for each synthetic record, the original it was generated from
(docs/metrics.md, Linkage attack).

The modules follow the attack's steps: :mod:`.attack` (``linkage_attack``; how it runs
and its deliberate deviations from the reference), :mod:`.prepare` (configuration
against the data, complete records, per-side statistics), :mod:`.covariance` (the
Mahalanobis method's whitening), :mod:`.blocking`, :mod:`.scoring` (the passes over
the blocks), :mod:`.rates` (rates, baselines, top-k, precision-recall, warnings) and
:mod:`.attack_result` (what the attack returns).

What the Spark workers run is in :mod:`.block_stream` (cutting the sorted rows into
blocks), :mod:`.block_scoring` (scoring one block) and :mod:`.kernel` (numpy/scipy),
with the column names of :mod:`.names`. A worker imports this package on the way to
them, so this file imports nothing: the workers never load the driver's modules.
"""
