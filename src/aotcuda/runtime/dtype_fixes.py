"""What an input of the wrong dtype is told to do: the conversion that keeps its values' meaning.

``tensor.to(dtype)`` is the fix for most mismatches (float64 for float32, float32 for bfloat16), but not
where the cast changes what the values mean: it drops a complex tensor's imaginary part, keeps
view_as_real's pairs as real parts, refuses a quantized tensor, and reads a mask's values as 1/0 flags (a bool
mask's, and an integer tensor's of 0s and 1s where floats are taken, which a program may add as 0 and a large
negative value).
"""

from __future__ import annotations

import torch

from aotcuda.runtime.specs import TensorSpec


def dtype_fix(tensor: torch.Tensor, spec: TensorSpec) -> str:
    """How to pass the exported dtype. A cast from complex to real drops the imaginary part (torch warns
    and goes on), so for a complex tensor where a real one is taken it is not the advice; nor is a cast to
    complex for a real tensor of (re, im) pairs (view_as_real's layout: one more dim, of 2), which a cast
    would keep as real parts of the wrong shape."""
    given, wanted = tensor.dtype, spec.dtype
    if tensor.is_quantized:  # tensor.to(torch.float32) raises "Creation of quantized tensor requires quantized dtype"
        cast = "" if wanted == torch.float32 else f".to({wanted})"
        return f"it is a quantized tensor, which tensor.to() does not cast: pass tensor.dequantize(){cast}"
    if given.is_complex and not wanted.is_complex and wanted != torch.bool:  # to(bool): either part nonzero
        return (f"it takes a real tensor, and tensor.to({wanted}) would drop the imaginary part: pass the real "
                f"values it was exported with (torch.view_as_real(tensor) for the (re, im) pairs, "
                f"tensor.real for the real part only), as {wanted}")
    if wanted.is_complex and given.is_floating_point and tensor.dim() == spec.rank + 1 and tensor.shape[-1] == 2:
        real = wanted.to_real()
        cast = "" if given == real else f".to({real})"
        return (f"for (re, im) pairs in the last dim, pass torch.view_as_complex(tensor{cast}) "
                f"(tensor.to({wanted}) would keep the pairs as real parts)")
    if (wanted == torch.bool) != (given == torch.bool):
        return _mask_fix(given, wanted)
    if wanted.is_floating_point and not given.is_floating_point and not given.is_complex and _zeros_and_ones(tensor):
        return _int_mask_fix(wanted)
    return f"pass tensor.to({wanted})"


def _zeros_and_ones(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` holds 0s and 1s alone (a mask, most likely): read only on this error path, once."""
    try:
        return tensor.numel() > 0 and bool(((tensor == 0) | (tensor == 1)).all())
    except (RuntimeError, NotImplementedError):  # a meta tensor, or one whose values cannot be read here
        return False


def _int_mask_fix(wanted: torch.dtype) -> str:
    """An integer tensor of 0s and 1s where floats are taken: a Hugging Face ``attention_mask`` (int64, 1 where
    attended) passed for a float mask. The cast keeps the 1s and 0s, right where the program multiplies by the mask
    and wrong, silently, where it adds it (an additive mask: 0 where attended, -inf where masked; the 1/0 mask added
    to the scores shifts them by 1 and masks nothing). As for a bool mask (``_mask_fix``), aotcuda cannot know which
    the program does, nor that the tensor is a mask at all (0s and 1s may be counts or labels): the fix says what the
    cast does and gives the additive form, for either meaning of the 1s, if it is one. The masked value is the
    dtype's lowest, as Hugging Face fills its masks, not -inf: a row masked whole is then softmax's uniform row, where
    -inf gives nan (exp(-inf - -inf)) that spreads through what follows (review40a)."""
    return (f"the tensor holds 0s and 1s alone, and tensor.to({wanted}) keeps them as 1.0 and 0.0 (right where the "
            "program multiplies by them); if this is a 0/1 mask and the program adds it (0 where attended, a large "
            f"negative value where masked), pass torch.zeros_like(tensor, dtype={wanted}).masked_fill(tensor == 0, "
            f"{_LOWEST.format(wanted)}) for a mask whose 1s attend (Hugging Face's attention_mask; "
            f"masked_fill(tensor != 0, ...) for one whose 1s mask){_NOT_INF}")


# The masked value of an additive mask advised here: the dtype's lowest finite value, as Hugging Face fills its masks.
# -inf masks alike where a row keeps one place, but a row masked whole (padding, a causal mask's empty rows) is nan
# after softmax, and the nan spreads; the lowest value gives that row softmax's uniform weights instead.
_LOWEST = "torch.finfo({}).min"
_NOT_INF = ": the dtype's lowest value, not float('-inf'), which makes a row masked whole nan after a softmax"


def _mask_fix(given: torch.dtype, wanted: torch.dtype) -> str:
    """A cast to or from bool keeps the values' meaning only for 1/0 flags: a Hugging Face-style additive mask
    (0 where attended, -inf where masked) cast to bool is True where it masks, the opposite of what
    scaled_dot_product_attention reads, and the answer is silently wrong (a new user's block: 1.04 off eager).
    Which meaning the program gives True, aotcuda cannot know, so the fix says what the cast does and both
    conversions, not one guess."""
    if wanted == torch.bool:
        additive = ("an additive mask (0 where attended, -inf where masked) becomes True where it masks; "
                    if given.is_floating_point else "")
        return (f"tensor.to(torch.bool) makes every nonzero value True and 0 False, so {additive}pass the bool "
                "mask in the meaning the program gives True: `tensor == 0` for True at the zeros (an additive "
                "mask's attended places, as scaled_dot_product_attention reads a bool mask), `tensor != 0` for "
                "True at the nonzeros (a 1/0 mask's ones)")
    if wanted.is_floating_point:
        return (f"tensor.to({wanted}) makes True 1.0 and False 0.0, a 1/0 mask; where the program adds the mask "
                f"(0 where attended, a large negative value where masked), pass torch.zeros_like(tensor, "
                f"dtype={wanted}).masked_fill(~tensor, {_LOWEST.format(wanted)}) for a mask whose True attends "
                f"(masked_fill(tensor, ...) for one whose True masks){_NOT_INF}")
    return f"pass tensor.to({wanted}) (True becomes 1, False 0)"
