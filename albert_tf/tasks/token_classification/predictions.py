"""NER prediction files: a file's predicted tags written back in its own format (file_formats.py).

CoNLL: every word line with the predicted tag appended as a last column (conlleval's ``word ...
gold predicted`` layout for labelled input); other lines as they are. JSON Lines: every object
with ``tags`` set to the predictions (the input's tags, if any, kept under ``gold_tags``; U+2028,
U+2029 and U+0085 escaped, ``json_line``). One output line per input line, each ended by
"\\n" (the input's lines as ``read_lines`` splits them). Both read back with data_prep's
``read_sentences``.
"""

from __future__ import annotations

import json
from typing import Sequence

from albert_tf.files.atomic import atomic_open
from albert_tf.files.json_objects import json_line
from albert_tf.tasks.token_classification.file_formats import (CONLL, JSON_LINES, conll_columns,
                                                               is_conll_word, read_lines,
                                                               resolve_format)


def write_predictions(input_path: str, output_path: str, predicted: Sequence[Sequence[str]],
                      file_format: str = "auto") -> str:
    """Writes ``predicted`` (tags per sentence, in ``read_sentences`` order) back in the format of
    ``input_path`` to ``output_path`` (atomically; see the module doc). Returns ``output_path``."""
    file_format = resolve_format(input_path, file_format)
    remaining = iter(tag for tags in predicted for tag in tags)
    with atomic_open(output_path) as output:
        for _, line in read_lines(input_path):
            if file_format == CONLL and is_conll_word(conll_columns(line)):
                word_line = line.rstrip(" \t")
                output.write(f"{word_line} {next(remaining)}\n")
            elif file_format == JSON_LINES and line.strip():
                record = json.loads(line)
                if "tags" in record:
                    record["gold_tags"] = record["tags"]
                record["tags"] = [next(remaining) for _ in record["tokens"]]
                output.write(json_line(record))
            else:
                output.write(line + "\n")
    if next(remaining, None) is not None:
        raise ValueError(f"more predicted tags than words in {input_path}")
    return output_path
