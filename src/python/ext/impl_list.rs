//! A module call's tensors (their TensorImpl addresses), listed without a heap allocation for
//! the few that nearly every call has: `--modules` lists a call's inputs when it starts and its
//! outputs when it ends, and two allocations and frees per call were a visible part of what a
//! call cost (the allocator's own bookkeeping).

/// The tensors held inline; a call with more moves them all to the heap.
const INLINE: usize = 6;

/// A list of TensorImpl addresses, inline up to `INLINE`.
pub struct ImplList {
    inline: [usize; INLINE],
    len: usize,
    spilled: Vec<usize>,
}

impl ImplList {
    pub fn new() -> Self {
        ImplList {
            inline: [0; INLINE],
            len: 0,
            spilled: Vec::new(),
        }
    }

    pub fn push(&mut self, address: usize) {
        if self.len < INLINE {
            self.inline[self.len] = address;
        } else {
            if self.len == INLINE {
                self.spilled.extend_from_slice(&self.inline);
            }
            self.spilled.push(address);
        }
        self.len += 1;
    }

    pub fn as_slice(&self) -> &[usize] {
        if self.len <= INLINE {
            &self.inline[..self.len]
        } else {
            &self.spilled
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_every_address_in_order_inline_and_spilled() {
        for n in [0, 1, INLINE - 1, INLINE, INLINE + 1, 3 * INLINE] {
            let mut list = ImplList::new();
            for a in 0..n {
                list.push(100 + a);
            }
            let want: Vec<usize> = (0..n).map(|a| 100 + a).collect();
            assert_eq!(list.as_slice(), want.as_slice(), "{n} addresses");
        }
    }
}
