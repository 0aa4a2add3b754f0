"""files: reading and writing files safely, for every command and library module of both packages.

What belongs here: the file handling that knows nothing of models or tasks (works on local paths
and on anything ``tf.io.gfile`` handles, e.g. ``gs://``). It is the bottom layer: it imports no other
project folder. What does not: checkpoints (albert_tf/checkpoints/), SavedModel and TFLite exports
(albert_tf/serving/), the feature cache (data_prep/common/feature_cache.py), record schemas (each
task's own modules).

- atomic.py: outputs that appear under their name only when complete (temporary name, then rename).
- paths.py: input glob patterns that skip what is not data; output paths checked before any work
  (never an input, never over one another).
- run_lock.py: one run per output directory (a lock file naming its holder; stale ones taken over).
- processes.py: whether a process of this machine still runs (for stale locks and temporaries).
- records.py: TFRecord reading with its checks (empty or short files) and the tracing of a corrupt
  record back to its file.
"""
