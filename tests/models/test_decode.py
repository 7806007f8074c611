"""The Llama-3-shaped decode step (aotcuda.models.decoder, benchmarks/decode.py) lowered for the CPU at the
tiny config: the package's logits match eager step after step, with the KV cache carried in the
program's mutated buffers, and the ExportedProgram after the passes has no complex value left.
One AOTInductor compile for the module; the CUDA test (batch 1, where Inductor writes the projections as
matrix-vector reductions) compiles its own."""

import pytest
import torch

import aotcuda
from aotcuda.models.decoder import DecoderConfig, bytes_read_per_step, make_decoder

BATCH, STEPS = 2, 5


@pytest.fixture(scope="module")
def lowered_decoder(tmp_path_factory):
    config = DecoderConfig.tiny()
    model = make_decoder(config, BATCH, dtype=torch.float32, seed=1)
    example = (torch.zeros(BATCH, 1, dtype=torch.long), torch.zeros(1, dtype=torch.long))
    lowered = aotcuda.lower(model, example, device="cpu",
                            package_path=tmp_path_factory.mktemp("decode") / "decode.pt2")
    return config, lowered


def test_the_lowered_program_has_no_complex_value_and_mutates_the_cache(lowered_decoder):
    config, lowered = lowered_decoder
    ep = lowered.exported_program
    complex_nodes = [node.name for node in ep.graph.nodes
                     if isinstance(node.meta.get("val"), torch.Tensor) and node.meta["val"].is_complex()]
    assert complex_nodes == []
    mutated = set(ep.graph_signature.buffers_to_mutate.values())
    assert {f"layers.{i}.attention.cache_{kv}" for i in range(config.n_layers) for kv in "kv"} <= mutated
    assert lowered.fallback_kernels == []


def test_decode_steps_match_eager_with_the_cache_carried(lowered_decoder):
    config, lowered = lowered_decoder
    eager = make_decoder(config, BATCH, dtype=torch.float32, seed=1)  # the same weights, a fresh cache
    program = aotcuda.load(lowered.package_path)
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, config.vocab_size, (BATCH, 1), generator=generator)
    with torch.no_grad():
        for position in range(STEPS):
            input_pos = torch.tensor([position])
            want = eager(tokens, input_pos)
            got = program(tokens, input_pos)
            assert got.shape == (BATCH, config.vocab_size) and got.dtype == torch.float32
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
            tokens = want.argmax(-1, keepdim=True)  # greedy: the next step depends on this one
    # The cache really is carried: a step that restarts at position 0 gives a different result than
    # the same tokens after STEPS positions (attention then sees the earlier positions).
    with torch.no_grad():
        again = program(tokens, torch.tensor([STEPS]))
        fresh = make_decoder(config, BATCH, dtype=torch.float32, seed=1)(tokens, torch.tensor([STEPS]))
    assert not torch.allclose(again, fresh, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(again, eager(tokens, torch.tensor([STEPS])), rtol=1e-5, atol=1e-5)


def test_bytes_read_per_step_counts_the_weights_and_the_cache():
    config = DecoderConfig.tiny()
    model = make_decoder(config, BATCH, dtype=torch.bfloat16)
    d, layers, kv = config.dim, config.n_layers, config.n_kv_heads * config.head_dim
    per_layer = (2 * d * d + 2 * d * kv + 3 * d * config.ffn_dim + 2 * d) * 2
    cache = layers * 2 * BATCH * kv * config.max_seq_len * 2
    assert bytes_read_per_step(model) == layers * per_layer + (d + config.vocab_size * d) * 2 + cache


@pytest.mark.cuda
def test_a_cuda_decode_step_at_batch_1_stores_each_mlp_vector_and_matches_eager(tmp_path):
    # Batch 1 on CUDA: Inductor writes every projection as a matrix-vector reduction, and
    # StoreVectorOperandsPass stores each layer's silu(w1 x) * w3 x before w2 (one per layer).
    config = DecoderConfig.tiny()
    model = make_decoder(config, 1, device="cuda", dtype=torch.float32, seed=2)
    example = (torch.zeros(1, 1, dtype=torch.long, device="cuda"), torch.zeros(1, dtype=torch.long, device="cuda"))
    lowered = aotcuda.lower(model, example, device="cuda", package_path=tmp_path / "decode.pt2")
    (stores,) = [r for r in lowered.pass_results if r.name == "StoreVectorOperandsPass"]
    assert stores.counts == {"stored": config.n_layers}
    eager = make_decoder(config, 1, device="cuda", dtype=torch.float32, seed=2)
    tokens = torch.randint(0, config.vocab_size, (1, 1), device="cuda")
    with aotcuda.load(lowered.package_path, cuda_graphs=True) as program, torch.no_grad():
        for position in range(STEPS):
            input_pos = torch.tensor([position], device="cuda")
            want = eager(tokens, input_pos)
            torch.testing.assert_close(program(tokens, input_pos), want, rtol=1e-5, atol=1e-5)
            tokens = want.argmax(-1, keepdim=True)
