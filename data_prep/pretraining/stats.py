"""Counts over generated pretraining instances and the JSON summary written beside the output.

The fractions are defined as in the statistics the tests hold for the reference's own output, all
computed from the written ids:
- mean_tokens: real tokens per instance ([CLS] and [SEP]s included);
- masked_fraction: predicted positions / real tokens;
- mask_token_fraction: predicted positions whose input id is [MASK] / predicted positions;
- kept_fraction: predicted positions whose input id equals the label / predicted positions;
- random_token_fraction: the remaining predicted positions (a random replacement that happens to
  draw the original token or [MASK] counts as kept or [MASK], as it would when read from the file);
- sop_label1_fraction: instances with next_sentence_labels = 1 / instances.

``sentences_too_long`` counts the sentences (input lines, each once, not once per pass) longer
than max_seq_length - 4 pieces: every instance that holds one holds only part of it
(data_prep/pretraining/instances.py, ``longest_whole_sentence``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from data_prep.pretraining.instances import IN_ORDER, PAIR_KINDS, RANDOM_DOCUMENT

# In sentence-order mode, above this share of instances taking segment B from another
# document the run warns: most of its sentence-order labels then say nothing about order.
RANDOM_DOCUMENT_WARNING_FRACTION = 0.5


@dataclasses.dataclass
class GenerationStats:
    """Additive counters; ``merge`` adds another set (e.g. one chunk's) into this one."""

    documents: int = 0
    sentences: int = 0
    sentences_too_long: int = 0  # longer than instances.longest_whole_sentence: cut in every record
    invalid_lines_skipped: int = 0
    instances: int = 0
    real_tokens: int = 0
    predicted: int = 0
    predicted_as_mask: int = 0
    predicted_kept: int = 0
    pair_kinds: dict[str, int] = dataclasses.field(
        default_factory=lambda: {kind: 0 for kind in PAIR_KINDS})
    ngram_lengths: dict[int, int] = dataclasses.field(default_factory=dict)

    def add_instance(self, input_ids: Sequence[int], masked_lm_positions: Sequence[int],
                     masked_lm_ids: Sequence[int], mask_id: int, pair_kind: str,
                     ngram_lengths: Sequence[int]) -> None:
        """Counts one instance: input_ids [T] after masking, positions and label ids [P]."""
        self.instances += 1
        self.real_tokens += len(input_ids)
        self.predicted += len(masked_lm_positions)
        for position, label in zip(masked_lm_positions, masked_lm_ids):
            written = input_ids[position]
            self.predicted_as_mask += written == mask_id
            self.predicted_kept += written == label
        self.pair_kinds[pair_kind] += 1
        for length in ngram_lengths:
            self.ngram_lengths[length] = self.ngram_lengths.get(length, 0) + 1

    def merge(self, other: "GenerationStats") -> None:
        for field in dataclasses.fields(self):
            mine, theirs = getattr(self, field.name), getattr(other, field.name)
            if isinstance(mine, dict):
                for key, count in theirs.items():
                    mine[key] = mine.get(key, 0) + count
            else:
                setattr(self, field.name, mine + theirs)

    def summary(self) -> dict[str, Any]:
        """The JSON-ready summary: fractions (definitions in the module docstring) and raw counts."""
        predicted = max(self.predicted, 1)
        label1 = self.instances - self.pair_kinds[IN_ORDER]
        return {
            "instances": self.instances,
            "mean_tokens": self.real_tokens / max(self.instances, 1),
            "masked_fraction": self.predicted / max(self.real_tokens, 1),
            "mask_token_fraction": self.predicted_as_mask / predicted,
            "kept_fraction": self.predicted_kept / predicted,
            "random_token_fraction": (self.predicted - self.predicted_as_mask - self.predicted_kept)
                                     / predicted,
            "sop_label1_fraction": label1 / max(self.instances, 1),
            "sentence_pairs": dict(self.pair_kinds),
            "ngram_length_histogram": {str(n): self.ngram_lengths[n] for n in sorted(self.ngram_lengths)},
            "documents": self.documents,
            "sentences": self.sentences,
            "sentences_too_long": self.sentences_too_long,
            "invalid_lines_skipped": self.invalid_lines_skipped,
        }


def sentence_order_warning(summary: dict[str, Any], random_next_sentence: bool) -> str | None:
    """A warning when most sentence-order (SOP) instances took segment B from another document.

    A chunk of a single sentence gets a random document's text as segment B (label 1), as in the
    reference; a corpus of one sentence per line with blank lines between documents gives a few
    percent of such pairs. A corpus of one paragraph per line between blank lines (a Wikipedia
    extractor's output), or lines longer than --max_seq_length, make nearly every chunk a single
    line: the run completes, but the SOP task degenerates into telling random pairs apart. None
    when the share is below ``RANDOM_DOCUMENT_WARNING_FRACTION`` or in NSP mode (where half the
    pairs are random by design).
    """
    instances = summary["instances"]
    random_pairs = summary["sentence_pairs"][RANDOM_DOCUMENT]
    if random_next_sentence or not instances or \
            random_pairs <= RANDOM_DOCUMENT_WARNING_FRACTION * instances:
        return None
    documents, sentences = summary["documents"], summary["sentences"]
    return (f"{random_pairs} of {instances} instances ({100 * random_pairs / instances:.0f}%) take "
            "segment B from another document instead of testing sentence order, because their "
            f"chunk holds a single line (the {documents} documents hold "
            f"{sentences / max(documents, 1):.1f} lines on average). Sentence-order prediction "
            "needs documents of several lines: one sentence per line, a blank line between "
            "documents (split paragraphs into sentences); lines longer than --max_seq_length "
            "pieces have the same effect")


def empty_outputs_warning(instances: int, output_files: Sequence[str]) -> str | None:
    """A warning when there are fewer instances than output files: records go round-robin, so
    the last files are written empty, and run_pretraining refuses an empty file (a glob over the
    outputs would stop it). None when every output holds a record."""
    empty = output_files[instances:]
    if not empty:
        return None
    shown = ", ".join(empty[:3]) + (f" and {len(empty) - 3} more" if len(empty) > 3 else "")
    return (f"{len(empty)} of the {len(output_files)} output files hold no record ({shown}): the "
            f"run made {instances} instances, fewer than the files; run_pretraining refuses an "
            "empty file, so leave them out of its --input_file, or give fewer --output_file paths")
