#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Generate the model profiles tools/models/{resnet50,bert_base,bert_large}.csv.

Each file lists every gradient tensor in backward order (the reverse of the
framework's parameter registration order, as PyTorch DDP assumes) with its
layer index (forward order, input side = 0), float32 element count and the
compute time of the layer that owns it.  See tools/models/README.md.

Python 3 standard library only.  Usage: gen_profiles.py [--out DIR]
(default: the directory of this script).  Exits non-zero if a parameter
count differs from the architecture's known total.
"""
import argparse
import os
import sys

# ---------------------------------------------------------------------------
# The study's setting (Shi et al. 2020): batch per GPU and single-GPU
# throughput in samples/s.  Iteration time (forward + backward) = batch /
# throughput.
MODELS = {
    'resnet50': dict(batch=64, throughput=253.1, params=25557032),
    'bert_base': dict(batch=64, throughput=212.8, params=109482240),
    'bert_large': dict(batch=8, throughput=49.0, params=335141888),
}
BERT_SEQ = 128          # sequence length assumed for BERT
NORM_FLOPS = 8          # per output element, batch/layer norm forward
BWD_OVER_FWD = 2.0      # backward FLOPs = 2 x forward


class Model:
    """Layers in forward order; each owns tensors and forward FLOPs per
    sample (param-free operations are charged to the parameterized layer
    that precedes them in the forward pass)."""

    def __init__(self):
        self.layers = []    # [name, [(tensor name, elements)], fwd_flops]

    def layer(self, name, tensors, flops):
        self.layers.append([name, tensors, float(flops)])

    def charge(self, flops):
        self.layers[-1][2] += flops


# --- ResNet-50 (torchvision, v1.5: stride on the 3x3 conv) -----------------
def resnet50():
    m = Model()
    hw = [224]

    def conv(name, cin, cout, k, stride):
        pad = k // 2
        out = (hw[0] + 2 * pad - k) // stride + 1
        hw[0] = out
        m.layer(name, [(name + '.weight', cout * cin * k * k)],
                2 * cout * cin * k * k * out * out)
        return cout

    def bn(name, c, relu):
        n = c * hw[0] * hw[0]
        m.layer(name, [(name + '.weight', c), (name + '.bias', c)],
                NORM_FLOPS * n)
        if relu:
            m.charge(n)

    conv('conv1', 3, 64, 7, 2)
    bn('bn1', 64, True)
    hw[0] = (hw[0] + 2 - 3) // 2 + 1                # maxpool 3x3/2
    m.charge(9 * 64 * hw[0] * hw[0])
    cin = 64
    for li, (planes, blocks, stride) in enumerate(
            [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], 1):
        for b in range(blocks):
            p = 'layer%d.%d.' % (li, b)
            s = stride if b == 0 else 1
            hw_in = hw[0]
            conv(p + 'conv1', cin, planes, 1, 1)
            bn(p + 'bn1', planes, True)
            conv(p + 'conv2', planes, planes, 3, s)
            bn(p + 'bn2', planes, True)
            conv(p + 'conv3', planes, planes * 4, 1, 1)
            bn(p + 'bn3', planes * 4, False)
            if b == 0:
                hw_out = hw[0]
                hw[0] = hw_in
                conv(p + 'downsample.0', cin, planes * 4, 1, s)
                bn(p + 'downsample.1', planes * 4, False)
                assert hw[0] == hw_out
            n = planes * 4 * hw[0] * hw[0]
            m.charge(2 * n)                         # residual add + relu
            cin = planes * 4
    m.charge(cin * hw[0] * hw[0])                   # global average pool
    m.layer('fc', [('fc.weight', 1000 * cin), ('fc.bias', 1000)],
            2 * 1000 * cin)
    return m


# --- BERT (the original configs; BertModel incl. pooler, no heads) ---------
def bert(hidden, layers, heads, inter):
    m = Model()
    vocab, maxpos, types, s = 30522, 512, 2, BERT_SEQ
    tok = s * hidden                                 # elements per sample

    def dense(name, cin, cout, rows):
        m.layer(name, [(name + '.weight', cout * cin), (name + '.bias', cout)],
                2 * rows * cin * cout)

    def norm(name, n):
        m.layer(name, [(name + '.weight', hidden), (name + '.bias', hidden)],
                NORM_FLOPS * n)

    e = 'embeddings.'
    m.layer(e + 'word_embeddings',
            [(e + 'word_embeddings.weight', vocab * hidden)], tok)
    m.layer(e + 'position_embeddings',
            [(e + 'position_embeddings.weight', maxpos * hidden)], tok)
    m.layer(e + 'token_type_embeddings',
            [(e + 'token_type_embeddings.weight', types * hidden)], tok)
    m.charge(2 * tok)                                # the two sums
    norm(e + 'LayerNorm', tok)
    for i in range(layers):
        p = 'encoder.layer.%d.' % i
        dense(p + 'attention.self.query', hidden, hidden, s)
        dense(p + 'attention.self.key', hidden, hidden, s)
        dense(p + 'attention.self.value', hidden, hidden, s)
        # scores Q K^T and context P V: 2 * s*s*hidden MACs; scale +
        # softmax ~ 6 FLOPs per score
        m.charge(2 * 2 * s * s * hidden + 6 * heads * s * s)
        dense(p + 'attention.output.dense', hidden, hidden, s)
        m.charge(tok)                                # residual add
        norm(p + 'attention.output.LayerNorm', tok)
        dense(p + 'intermediate.dense', hidden, inter, s)
        m.charge(8 * s * inter)                      # GELU
        dense(p + 'output.dense', inter, hidden, s)
        m.charge(tok)                                # residual add
        norm(p + 'output.LayerNorm', tok)
    dense('pooler.dense', hidden, hidden, 1)         # first token only
    m.charge(hidden)                                 # tanh
    return m


BUILDERS = {
    'resnet50': resnet50,
    'bert_base': lambda: bert(768, 12, 12, 3072),
    'bert_large': lambda: bert(1024, 24, 16, 4096),
}


def profile(key):
    """CSV text and a summary for one model."""
    cfg = MODELS[key]
    m = BUILDERS[key]()
    iter_us = cfg['batch'] / cfg['throughput'] * 1e6
    fwd_total = sum(l[2] for l in m.layers) * cfg['batch']
    us_per_flop = iter_us / (fwd_total * (1 + BWD_OVER_FWD))
    rows = []
    for li in range(len(m.layers) - 1, -1, -1):      # backward order
        name, tensors, flops = m.layers[li]
        fwd = flops * cfg['batch'] * us_per_flop
        for ti, (tname, n) in enumerate(reversed(tensors)):
            # the layer's time sits on its first tensor in backward order
            rows.append((tname, li, n, fwd if ti == 0 else 0.0,
                         fwd * BWD_OVER_FWD if ti == 0 else 0.0))
    lines = ['order,name,layer,elements,fwd_us,bwd_us']
    for i, (tname, li, n, f, b) in enumerate(rows):
        lines.append('%d,%s,%d,%d,%.3f,%.3f' % (i, tname, li, n, f, b))
    params = sum(r[2] for r in rows)
    summary = dict(params=params, tensors=len(rows), layers=len(m.layers),
                   iter_us=iter_us,
                   gflops=fwd_total * (1 + BWD_OVER_FWD) / 1e9)
    return '\n'.join(lines) + '\n', summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', default=os.path.dirname(os.path.abspath(
        __file__)))
    args = ap.parse_args()
    ok = True
    for key in MODELS:
        text, s = profile(key)
        with open(os.path.join(args.out, key + '.csv'), 'w') as f:
            f.write(text)
        good = s['params'] == MODELS[key]['params']
        ok = ok and good
        print('%-10s params %d (%s, expected %d)  tensors %d  layers %d  '
              'iteration %.1f us  %.1f GFLOP/iteration' %
              (key, s['params'], 'ok' if good else 'MISMATCH',
               MODELS[key]['params'], s['tensors'], s['layers'],
               s['iter_us'], s['gflops']))
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
