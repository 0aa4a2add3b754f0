"""One chunk of raw documents -> shuffled, serialized pretraining records plus their statistics.

This is the unit of work of the generator: a worker process runs ``ChunkProcessor.process`` on one
``DocumentChunk`` at a time. Every random decision of a chunk comes from one ``random.Random`` seeded
by (random_seed, chunk index), so a chunk's records do not depend on which worker made them or when.
Each line is tokenized once per chunk and reused by all ``dupe_factor`` passes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random

from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.normalization import preprocess_text
from data_prep.pretraining.corpus import DocumentChunk
from data_prep.pretraining.instances import (InstanceConfig, TrainingInstance, iter_chunk_instances,
                                            longest_whole_sentence)
from data_prep.pretraining.records import serialize_pretraining_example
from data_prep.pretraining.stats import GenerationStats


@dataclasses.dataclass(frozen=True)
class GenerationConfig:
    """Everything that decides the records of a chunk besides its text and the tokenizer."""

    instance: InstanceConfig
    dupe_factor: int = 40
    random_seed: int = 12345
    do_lower_case: bool = True


@dataclasses.dataclass
class ChunkResult:
    """``records``: serialized tf.train.Example records in output order; ``stats``: their counts."""

    records: list[bytes]
    stats: GenerationStats


def chunk_seed(random_seed: int, chunk_index: int) -> int:
    """A 64-bit seed for chunk ``chunk_index``, stable across Python versions and platforms."""
    digest = hashlib.sha256(f"albert_tf pretraining chunk {random_seed} {chunk_index}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


class _StartPieces(dict):
    """piece -> whether it starts a word, computed once per distinct piece by the tokenizer's rule."""

    def __init__(self, tokenizer: FullTokenizer):
        super().__init__()
        self._tokenizer = tokenizer

    def __missing__(self, piece: str) -> bool:
        self[piece] = value = self._tokenizer.is_start_piece(piece)
        return value


class _PieceIds(dict):
    """piece -> id: the vocabulary, plus the tokenizer's answer for pieces outside it (SP: unk id)."""

    def __init__(self, tokenizer: FullTokenizer):
        super().__init__(tokenizer.vocab)
        self._tokenizer = tokenizer

    def __missing__(self, piece: str) -> int:
        self[piece] = value = self._tokenizer.convert_tokens_to_ids([piece])[0]
        return value


class ChunkProcessor:
    """Tokenizes, builds, masks, serializes and shuffles the instances of one chunk."""

    def __init__(self, tokenizer: FullTokenizer, config: GenerationConfig):
        self.tokenizer = tokenizer
        self.config = config
        self._vocab_words = list(tokenizer.vocab)  # every piece, specials included, in id order, as the reference
        self._start_pieces = _StartPieces(tokenizer)
        self._piece_ids = _PieceIds(tokenizer)
        self._mask_id = tokenizer.mask_id

    def tokenize_documents(self, raw_documents: list[list[str]]
                           ) -> tuple[list[list[list[str]]], GenerationStats]:
        """Documents as lists of sentences (lists of pieces), and their counts: documents,
        sentences, and the sentences cut in every instance that holds them (longer than
        ``longest_whole_sentence``).

        SP mode: ``preprocess_text(line, lower=do_lower_case)``; WordPiece mode: ``line.strip()``.
        A line that is empty after that starts a new document (as in the reference); a line without
        pieces is dropped.
        """
        uses_sp = self.tokenizer.uses_sentencepiece
        longest = longest_whole_sentence(self.config.instance.max_seq_length)
        documents: list[list[list[str]]] = []
        stats = GenerationStats()
        for raw_document in raw_documents:
            document: list[list[str]] = []
            for line in raw_document:
                text = preprocess_text(line, lower=self.config.do_lower_case) if uses_sp else line.strip()
                if not text:
                    documents.append(document)
                    document = []
                    continue
                pieces = self.tokenizer.tokenize(text)
                if pieces:
                    document.append(pieces)
                    stats.sentences += 1
                    stats.sentences_too_long += len(pieces) > longest
            documents.append(document)
        documents = [document for document in documents if document]
        stats.documents = len(documents)
        return documents, stats

    def process(self, chunk: DocumentChunk) -> ChunkResult:
        """Records of all ``dupe_factor`` passes over the chunk, shuffled together, as the reference does."""
        rng = random.Random(chunk_seed(self.config.random_seed, chunk.index))
        documents, stats = self.tokenize_documents(chunk.documents)
        records = [self._serialize(instance, stats) for instance in iter_chunk_instances(
            documents, self.config.instance, self.config.dupe_factor, self._vocab_words,
            self._start_pieces.__getitem__, rng)]
        rng.shuffle(records)
        return ChunkResult(records, stats)

    def _serialize(self, instance: TrainingInstance, stats: GenerationStats) -> bytes:
        to_id = self._piece_ids.__getitem__
        input_ids = list(map(to_id, instance.tokens))
        label_ids = list(map(to_id, instance.masked_lm_labels))
        stats.add_instance(input_ids, instance.masked_lm_positions, label_ids, self._mask_id,
                           instance.pair_kind, instance.ngram_lengths)
        masking = self.config.instance.masking
        return serialize_pretraining_example(
            input_ids, instance.segment_ids, instance.token_boundary, instance.masked_lm_positions,
            label_ids, int(instance.is_random_next), self.config.instance.max_seq_length,
            masking.max_predictions_per_seq)
