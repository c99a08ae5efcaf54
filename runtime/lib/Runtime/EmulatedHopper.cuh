//===- EmulatedHopper.cuh - Hopper's machinery as host C++ ------*- C++ -*-===//
//
// Part of lina. Appended to EmulatedDevice.cuh (whose fibers, barriers and
// CTA state it uses) for the sources the emulated device compiles: what
// Hopper.cuh and the wgmma scans write in PTX, as asynchronous as the PTX
// ISA lets it be, so a kernel that reads too early sees it. A warpgroup
// product (wgmma) is one collective of the warpgroup's 128 threads, queued
// when the last of them issues it and computed at the wgmma.wait_group
// that retires its group, its shared-memory operands read then through
// their descriptors (the 128-byte swizzle or none), its accumulators NaN
// until then; a TMA box or bulk copy fills its destination with NaN when
// issued and lands when a thread next waits on its mbarrier; mbarriers
// count arrivals and bytes and flip their phase; named barriers (bar.sync,
// bar.arrive) count the threads they are given. Also the tf32 product and
// stmatrix.
//
//===----------------------------------------------------------------------===//

namespace lina_emu {

/// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: fp32 operands of
/// which the tensor core reads the top 19 bits (the low 13 dropped).
inline void mma_m16n8k8_tf32(float (&d)[4], const unsigned (&a)[4],
                             const unsigned (&b)[2]) {
  unsigned long long *mine = my_slot();
  for (int i = 0; i < 4; ++i)
    mine[i] = a[i] & 0xffffe000u;
  mine[4] = b[0] & 0xffffe000u;
  mine[5] = b[1] & 0xffffe000u;
  syncwarp();
  int l = lane(), group = l / 4, pair = l % 4;
  for (int out = 0; out < 4; ++out) {
    int row = group + (out >= 2 ? 8 : 0), col = 2 * pair + (out & 1);
    float sum = 0.0f;
    for (int k = 0; k < 8; ++k) {
      // A (row, k): lane (row % 8) * 4 + k % 4, register (row >= 8) +
      // 2 (k >= 4); B (k, col): lane col * 4 + k % 4, register k >= 4.
      int aLane = (row % 8) * 4 + k % 4, aReg = (row >= 8) + 2 * (k >= 4);
      int bLane = col * 4 + k % 4, bReg = 4 + (k >= 4);
      sum += bits_to_float((unsigned)slot_of(aLane)[aReg]) *
             bits_to_float((unsigned)slot_of(bLane)[bReg]);
    }
    d[out] += sum;
  }
  syncwarp();
}

/// stmatrix.sync.aligned.m8n8.{x2,x4}[.trans].shared.b16, ldmatrix's
/// inverse: lane 8 i + j names row j of matrix i, and register i of lane l
/// holds row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of matrix i (of its
/// transpose with trans).
inline void stmatrix(void *p, const unsigned *r, int matrices, bool trans) {
  unsigned long long *mine = my_slot();
  mine[0] = (unsigned long long)(uintptr_t)p;
  for (int i = 0; i < matrices; ++i)
    mine[1 + i] = r[i];
  syncwarp();
  int l = lane();
  if (l < 8 * matrices) {
    int i = l / 8, row = l % 8;
    unsigned char *rowAt = (unsigned char *)(uintptr_t)mine[0];
    for (int col = 0; col < 8; ++col) {
      // The element (row, col) of the matrix in memory is element (col,
      // row) of the transposed fragment.
      int fr = trans ? col : row, fc = trans ? row : col;
      unsigned word = (unsigned)slot_of(fr * 4 + fc / 2)[1 + i];
      unsigned short h = (unsigned short)(fc % 2 ? word >> 16 : word);
      memcpy(rowAt + 2 * col, &h, 2);
    }
  }
  syncwarp();
}

/// Named barrier \p id of \p count threads: bar.sync waits until the count
/// has arrived, bar.arrive (\p wait false) counts without waiting.
inline void named_barrier(int id, int count, bool wait) {
  NamedBarrier &b = current->named[id & 15];
  unsigned long long mine = b.generation;
  ++current->progress;
  if (++b.arrived >= count) {
    b.arrived = 0;
    ++b.generation;
    return;
  }
  while (wait && b.generation == mine && !current->trapped)
    yield();
}

/// The mbarrier at \p bar, which must have been initialised in this CTA.
inline Mbarrier &mbarrier(const void *bar) {
  auto found = current->mbarriers.find(bar);
  if (found == current->mbarriers.end()) {
    fprintf(stderr, "lina emulated device: an mbarrier used before "
                    "mbarrier.init\n");
    trap();
  }
  return found->second;
}
/// A phase completes when its arrivals and its bytes are all in. Every
/// arrival and every byte count is progress (the launch's deadlock check
/// sees a round without any).
inline void mbarrier_settle(Mbarrier &m) {
  ++current->progress;
  if (m.pending > 0 || m.bytes != 0)
    return;
  m.phase ^= 1u;
  m.pending = m.expected;
}
inline void mbarrier_init(void *bar, unsigned count) {
  memset(bar, 0, 8);
  current->mbarriers[bar] = Mbarrier{int(count), int(count), 0, 0};
}
/// mbarrier.arrive.expect_tx: the bytes the phase now also waits for, then
/// an arrival.
inline void mbarrier_arrive_expect(void *bar, unsigned bytes) {
  Mbarrier &m = mbarrier(bar);
  m.bytes += bytes;
  --m.pending;
  mbarrier_settle(m);
}
/// The copies in flight on \p m land and complete their bytes.
inline void mbarrier_land(Mbarrier &m) {
  std::vector<CopyInFlight> copies = std::move(m.inFlight);
  m.inFlight.clear();
  for (CopyInFlight &c : copies) {
    c.land();
    m.bytes -= c.bytes;
    mbarrier_settle(m);
  }
}
/// mbarrier.try_wait.parity: whether the phase of parity \p parity has
/// completed (the current phase has the other parity), after the copies in
/// flight on it land. A thread that must wait lets the others run first.
inline bool mbarrier_try_wait(void *bar, unsigned parity) {
  Mbarrier &m = mbarrier(bar);
  mbarrier_land(m);
  if (m.phase != (parity & 1u))
    return true;
  yield();
  mbarrier_land(m);
  return m.phase != (parity & 1u);
}
/// A copy of \p bytes to \p dst, done by \p land, in flight on \p bar.
inline void mbarrier_copy(void *bar, void *dst, unsigned bytes,
                          std::function<void()> land) {
  Mbarrier &m = mbarrier(bar);
  memset(dst, 0xff, bytes); // NaN until it lands
  m.inFlight.push_back(CopyInFlight{std::move(land), bytes});
  ++current->progress;
}

/// cp.async.bulk global -> shared, counted on \p bar.
inline void bulk_copy(void *dst, const void *src, unsigned bytes, void *bar) {
  if ((uintptr_t)dst % 16 || (uintptr_t)src % 16 || bytes % 16)
    trap(); // the PTX ISA's 16-byte alignment and size
  mbarrier_copy(bar, dst, bytes, [=] { memcpy(dst, src, bytes); });
}

/// The byte at \p address as the swizzle of \p span bytes moves it: the
/// 16-byte piece's index XOR the row's (address bits 7 and up) within the
/// span's pattern (the 128-byte swizzle: bits 4-6 XOR bits 7-9).
inline uintptr_t swizzled(uintptr_t address, unsigned span) {
  if (span == 0)
    return address;
  uintptr_t pieces = span / 16 - 1; // 7, 3 or 1
  return address ^ (((address >> 7) & pieces) << 4);
}

/// cp.async.bulk.tensor global -> shared of one box at \p coords: elements
/// outside the tensor land as zeros, the box's rows in the map's swizzle;
/// in flight on \p bar (the box is read from global memory when it lands).
inline void tensor_copy(void *dst, const void *map, const int *coords, int rank,
                        void *bar) {
  TensorMap m;
  memcpy(&m, map, sizeof m);
  if (m.tag != kTensorMapTag || int(m.rank) != rank) {
    fprintf(stderr, "lina emulated device: a TMA copy through a tensor map "
                    "the emulated driver did not encode\n");
    trap();
  }
  const unsigned rowBytes = m.box[0] * m.elementBytes;
  if (m.swizzleBytes && rowBytes != m.swizzleBytes) {
    fprintf(stderr,
            "lina emulated device: a swizzled box's rows must be "
            "the swizzle's %u bytes (they are %u)\n",
            m.swizzleBytes, rowBytes);
    trap();
  }
  unsigned rows = 1;
  for (int d = 1; d < rank; ++d)
    rows *= m.box[d];
  int at[5] = {0, 0, 0, 0, 0};
  for (int d = 0; d < rank; ++d)
    at[d] = coords[d];
  unsigned char *to = (unsigned char *)dst;
  mbarrier_copy(bar, dst, rows * rowBytes, [=] {
    for (unsigned row = 0; row < rows; ++row) {
      // The row's coordinates in dimensions 1 and up, and whether it is in
      // the tensor.
      long long offset = 0;
      bool inside = true;
      unsigned rest = row;
      for (int d = 1; d < rank; ++d) {
        long long c = (long long)at[d] + rest % m.box[d];
        rest /= m.box[d];
        inside = inside && c >= 0 && c < (long long)m.dims[d];
        offset += c * (long long)m.strides[d];
      }
      for (unsigned e = 0; e < m.box[0]; ++e) {
        long long c = (long long)at[0] + e;
        unsigned char *into = (unsigned char *)swizzled(
            (uintptr_t)(to + row * rowBytes + e * m.elementBytes),
            m.swizzleBytes);
        if (inside && c >= 0 && c < (long long)m.dims[0])
          memcpy(into,
                 (const unsigned char *)(uintptr_t)m.address + offset +
                     c * m.elementBytes,
                 m.elementBytes);
        else
          memset(into, 0, m.elementBytes);
      }
    }
  });
}

/// A wgmma shared-memory descriptor. The GPU's holds bits 4-17 of the
/// operand's shared address (bits 0-13), the leading and stride byte
/// offsets (bits 16-29, 32-45, in 16-byte units) and the layout (bits
/// 62-63: 0 no swizzle, 1 the 128-byte swizzle). Here the address is a
/// host pointer: bits 14-15 take the carries of an advanced address, and
/// bits 52-61 index the pointer's upper bits in a table of those seen.
inline unsigned long long descriptorBases[1024];
inline int descriptorBaseCount = 0;

inline unsigned long long describe(const void *tile, unsigned lbo, unsigned sbo,
                                   unsigned layout = 1) {
  uintptr_t address = (uintptr_t)tile, base = address & ~(uintptr_t)0x3ffff;
  int index = 0;
  while (index < descriptorBaseCount && descriptorBases[index] != base)
    ++index;
  if (index == descriptorBaseCount) {
    if (index == 1024)
      trap();
    descriptorBases[descriptorBaseCount++] = base;
  }
  return (unsigned long long)((address >> 4) & 0x3fff) |
         ((unsigned long long)((lbo >> 4) & 0x3fff) << 16) |
         ((unsigned long long)((sbo >> 4) & 0x3fff) << 32) |
         ((unsigned long long)index << 52) |
         ((unsigned long long)(layout & 3) << 62);
}

/// Element (mn, k) of a wgmma operand in shared memory (A: M x K, B: N x
/// K), 16-bit, through descriptor \p desc (the PTX ISA's canonical layouts,
/// as CUTLASS's GmmaDescriptor spells them). The 128-byte swizzle: K-major,
/// 8 rows of 128 bytes a group, SBO between groups, k along the row;
/// MN-major (\p mnMajor), k a 128-byte row, SBO between groups of 8 k, 64
/// elements of mn along the row, LBO between those. No swizzle: 8 x 16-byte
/// core matrices (rows mn, 8 k a row, K-major; rows k, 8 mn a row,
/// MN-major), LBO between those adjacent in K and SBO between those
/// adjacent in M or N either way (as measured on an H200: WgmmaGpuTest).
inline unsigned short operand_element(unsigned long long desc, bool mnMajor,
                                      int mn, int k) {
  const unsigned layout = unsigned(desc >> 62);
  if (layout > 1) {
    fprintf(stderr,
            "lina emulated device: wgmma reads operands without a "
            "swizzle or in the 128-byte one only (descriptor "
            "layout %u)\n",
            layout);
    trap();
  }
  uintptr_t start =
      descriptorBases[(desc >> 52) & 0x3ff] + (uintptr_t)((desc & 0xffff) << 4);
  uintptr_t lbo = ((desc >> 16) & 0x3fff) << 4;
  uintptr_t sbo = ((desc >> 32) & 0x3fff) << 4;
  uintptr_t offset;
  if (layout == 0)
    offset =
        (k / 8) * lbo + (mn / 8) * sbo +
        (mnMajor ? (k % 8) * 16 + (mn % 8) * 2 : (mn % 8) * 16 + (k % 8) * 2);
  else
    offset = mnMajor ? (k % 8) * 128 + (k / 8) * sbo + (mn % 64) * 2 +
                           (mn / 64) * lbo
                     : (mn % 8) * 128 + (mn / 8) * sbo + k * 2;
  unsigned short h;
  memcpy(&h, (const void *)swizzled(start + offset, layout == 1 ? 128 : 0), 2);
  return h;
}

/// Computes \p p now: its shared-memory operands as they are, D's input
/// from the accumulators (chained) or as they were when issued.
inline void retire(PendingProduct &p) {
  static float A[64][16], B[256][16];
  for (int row = 0; row < 64; ++row)
    for (int k = 0; k < 16; ++k) {
      unsigned short h;
      if (p.aInRegisters) {
        // mma.m16n8k16's A layout, warp w holding rows 16 w ..
        int t = 32 * (row / 16) + (row % 8) * 4 + (k % 8) / 2;
        unsigned word = p.aWords[t][(row % 16 >= 8) + 2 * (k >= 8)];
        h = (unsigned short)(k % 2 ? word >> 16 : word);
      } else {
        h = operand_element(p.a, p.transA, row, k);
      }
      A[row][k] = p.f16 ? from_f16(h) : from_bf16(h);
    }
  for (int col = 0; col < p.n; ++col)
    for (int k = 0; k < 16; ++k) {
      unsigned short h = operand_element(p.b, p.transB, col, k);
      B[col][k] = p.f16 ? from_f16(h) : from_bf16(h);
    }
  const int per = p.n / 2;
  for (int t = 0; t < 128; ++t)
    for (int j = 0; j < p.n / 8; ++j)
      for (int h = 0; h < 2; ++h)
        for (int e = 0; e < 2; ++e) {
          int row = 16 * (t / 32) + t % 32 / 4 + 8 * h,
              col = 8 * j + 2 * (t % 4) + e, i = 4 * j + 2 * h + e;
          float sum = 0.0f;
          for (int k = 0; k < 16; ++k)
            sum += A[row][k] * B[col][k];
          float in = p.chained ? p.d[t][i] : p.input[t * per + i];
          p.d[t][i] = p.accumulate ? in + sum : sum;
        }
}

/// wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}: D (64 x N, fp32)
/// = A B (+ D where \p accumulate), A from the descriptor \p a (or, with
/// \p aRegisters, from each thread's four registers in mma.m16n8k16's A
/// layout, warp w holding rows 16 w ..), B from \p b; \p transA and
/// \p transB the operands' MN-major flags. A collective of the warpgroup:
/// the last thread to issue it queues it (PendingProduct) for the
/// wgmma.wait_group that retires its group, which writes every thread's
/// accumulators (warp w's rows 16 w + l / 4 (+ 8), columns 8 j + 2 (l % 4)
/// (+ 1), as m16n8's).
inline void wgmma(int n, float *d, const unsigned *aRegisters,
                  unsigned long long a, unsigned long long b, bool transA,
                  bool transB, int accumulate, bool f16) {
  unsigned long long *mine = my_slot();
  mine[0] = (unsigned long long)(uintptr_t)d;
  if (aRegisters)
    for (int i = 0; i < 4; ++i)
      mine[1 + i] = aRegisters[i];
  const int group = warp() / 4;
  gather(current->warpgroups[group], [&] {
    ProductQueue &q = current->products[group];
    PendingProduct p;
    p.n = n;
    p.accumulate = accumulate;
    p.a = a;
    p.b = b;
    p.aInRegisters = aRegisters != nullptr;
    p.transA = transA;
    p.transB = transB;
    p.f16 = f16;
    for (int t = 0; t < 128; ++t) {
      const unsigned long long *slot =
          current->slots[4 * group + t / 32][t % 32];
      p.d[t] = (float *)(uintptr_t)slot[0];
      for (int i = 0; i < 4; ++i)
        p.aWords[t][i] = (unsigned)slot[1 + i];
    }
    auto writes = [&](const PendingProduct &o) { return o.d[0] == p.d[0]; };
    p.chained = std::any_of(q.open.begin(), q.open.end(), writes);
    for (const std::vector<PendingProduct> &g : q.committed)
      p.chained = p.chained || std::any_of(g.begin(), g.end(), writes);
    if (!p.chained) {
      p.input.resize(size_t(128) * (n / 2));
      for (int t = 0; t < 128; ++t)
        memcpy(&p.input[size_t(t) * (n / 2)], p.d[t], sizeof(float) * (n / 2));
    }
    for (int t = 0; t < 128; ++t)
      for (int i = 0; i < n / 2; ++i)
        p.d[t][i] = NAN; // not there before the wait
    q.open.push_back(std::move(p));
  });
}

/// wgmma.commit_group: the warpgroup's products issued since the last
/// commit become a group.
inline void wgmma_commit() {
  const int group = warp() / 4;
  gather(current->warpgroups[group], [&] {
    ProductQueue &q = current->products[group];
    q.committed.push_back(std::move(q.open));
    q.open.clear();
  });
}

/// wgmma.wait_group \p pending: every committed group but the newest
/// \p pending retires, oldest first.
inline void wgmma_wait(int pending) {
  const int group = warp() / 4;
  gather(current->warpgroups[group], [&] {
    ProductQueue &q = current->products[group];
    while ((int)q.committed.size() > pending) {
      for (PendingProduct &p : q.committed.front())
        retire(p);
      q.committed.erase(q.committed.begin());
    }
  });
}

} // namespace lina_emu
