"""A linear address space with first-fit allocation, like an LVM volume group's extents.

Used by pools with contiguous allocation, where fragmentation limits the largest volume
that can be created even when enough free space exists in total.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field


@dataclass
class ExtentMap:
    """Free extents of a space of `size` bytes, kept sorted by offset and coalesced."""

    size: int
    _starts: list[int] = field(default_factory=list, repr=False)
    _lengths: list[int] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if self.size > 0 and not self._starts:
            self._starts.append(0)
            self._lengths.append(self.size)

    @classmethod
    def with_allocations(cls, size: int, allocations: list[tuple[int, int]]) -> ExtentMap:
        """Rebuild the free map of a space whose (offset, length) allocations are known."""
        space = cls(size=size)
        space._starts, space._lengths = [], []
        cursor = 0
        for offset, length in sorted(allocations):
            if offset > cursor:
                space._starts.append(cursor)
                space._lengths.append(offset - cursor)
            cursor = max(cursor, offset + length)
        if cursor < size:
            space._starts.append(cursor)
            space._lengths.append(size - cursor)
        return space

    def largest_free(self) -> int:
        return max(self._lengths, default=0)

    def free_bytes(self) -> int:
        return sum(self._lengths)

    def fragments(self) -> int:
        return len(self._starts)

    def allocate(self, length: int) -> int | None:
        """Reserve the first free extent that fits; return its offset, or None."""
        if length <= 0:
            return None
        for index, free in enumerate(self._lengths):
            if free >= length:
                offset = self._starts[index]
                if free == length:
                    del self._starts[index]
                    del self._lengths[index]
                else:
                    self._starts[index] = offset + length
                    self._lengths[index] = free - length
                return offset
        return None

    def allocate_at(self, offset: int, length: int) -> bool:
        """Reserve exactly [offset, offset+length) if it is free (used to roll back)."""
        index = bisect.bisect_right(self._starts, offset) - 1
        if index < 0 or length <= 0:
            return False
        start, free = self._starts[index], self._lengths[index]
        if offset + length > start + free:
            return False
        del self._starts[index]
        del self._lengths[index]
        if offset + length < start + free:
            self._starts.insert(index, offset + length)
            self._lengths.insert(index, start + free - offset - length)
        if offset > start:
            self._starts.insert(index, start)
            self._lengths.insert(index, offset - start)
        return True

    def release(self, offset: int, length: int) -> None:
        """Give an allocated extent back, merging it with free neighbours."""
        if length <= 0:
            return
        index = bisect.bisect_left(self._starts, offset)
        merges_left = index > 0 and self._starts[index - 1] + self._lengths[index - 1] == offset
        merges_right = index < len(self._starts) and offset + length == self._starts[index]
        if merges_left and merges_right:
            self._lengths[index - 1] += length + self._lengths[index]
            del self._starts[index]
            del self._lengths[index]
        elif merges_left:
            self._lengths[index - 1] += length
        elif merges_right:
            self._starts[index] = offset
            self._lengths[index] += length
        else:
            self._starts.insert(index, offset)
            self._lengths.insert(index, length)

    def resize(self, new_size: int) -> None:
        """Grow or shrink the space at its end; shrinking only removes free space."""
        if new_size >= self.size:
            self.release(self.size, new_size - self.size)
        else:
            # Drop or trim free extents past the new end; allocated extents past it are
            # the caller's to forbid (a pool cannot shrink below its used space).
            while self._starts and self._starts[-1] >= new_size:
                self._starts.pop()
                self._lengths.pop()
            if self._starts and self._starts[-1] + self._lengths[-1] > new_size:
                self._lengths[-1] = new_size - self._starts[-1]
        self.size = new_size

    def highest_allocated_end(self) -> int:
        """The end of the last allocated byte (0 when nothing is allocated)."""
        if not self._starts:
            return self.size
        last_start, last_length = self._starts[-1], self._lengths[-1]
        if last_start + last_length == self.size:
            return last_start
        return self.size
