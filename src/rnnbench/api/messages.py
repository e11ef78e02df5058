"""Every message check_recurrence's input validation raises (rnnbench.api.validate), in one place:
key -> str.format template. TypeError for a wrong type (TYPE_PROBLEMS), InputError (a ValueError)
for a bad value (VALUE_PROBLEMS); each names the argument (a leaf by its path, as params['W']) and
what is expected."""

from __future__ import annotations

from rnnbench.errors import InputError

_GIVE_A_TREE = "give a bool or a tree shaped like carry0"

# A wrong type: raised as TypeError.
TYPE_PROBLEMS: dict[str, str] = {
    "step": "step is {type}; expected a function step(ops, params, carry, x) -> (carry, y)",
    "loss": "loss is {type}; expected a function loss(ops, consts, ys, carry) -> scalar",
    "names_type": "{argument} is {value!r}; expected a list of names, e.g. [{example}]",
    "names_str": "{argument}: every name must be a str, got {value!r}",
    "xs_flag": "xs_requires_grad is {flag!r}; expected a bool",
    "batched_type": "batched is {batched!r}; expected a bool",
    "carry_flags_type": "{where} is {flags!r} ({type}); expected a bool (or a tree of bools shaped like carry0)",
    "unreadable": "{where} is a {type} that numpy cannot read; expected a numpy array",
    "not_real": "{where} is {what}; expected a real numeric array",
    "not_float": (
        "{where} is {what}; expected a float array (it is differentiated), e.g. np.asarray(value, dtype=float)"
    ),
    "length_type": "length is {length!r}; expected an int, the number of steps T",
    "consts_type": "consts is {type}; expected a dict of name -> array",
    "linear_type": "linear is {type}; expected a function linear(ops, params, x) -> (a, b), or None",
    "step_return": "step must return (carry, y_t); at step {t} it returned {type} {out!r:.80}",
}

# A bad value: raised as InputError (a ValueError).
VALUE_PROBLEMS: dict[str, str] = {
    # names and options
    "dtype": "dtype: unknown dtype {dtype!r}; known: {known}",
    "order": "order must be 1 (gradients) or 2 (also Hessian-vector products), got {order!r}",
    "oracle": "oracle must be one of {known}; got {oracle!r}",
    "modes": "modes: {error}",
    "batch_axis": (
        "batched=True, but {where} has shape {shape}: no axis {axis} to hold the batch (every carry leaf and y_t "
        "leaf is (B, ...), every xs leaf (T, B, ...))"
    ),
    "batch_sizes": "batched=True, but the batch axes disagree on the number of examples: {sizes}",
    "names_empty": "{argument}=[] selects nothing; leave it None for the default",
    "unknown_driver": "drivers: {error}",  # raised as registry.UnknownName, an InputError
    "loss_and_losses": "give either a loss function (`loss`) or loss forms (`losses`), not both",
    "model_loss": "losses: loss form 'model' needs a loss function (`loss`)",
    "unknown_loss": "losses: {error}",
    # flags
    "xs_flag_no_xs": "xs_requires_grad=True but xs is None: there is no input to differentiate",
    "carry_flags_dict": "{where} is a dict where {there} is a {type}; " + _GIVE_A_TREE,
    "carry_flags_keys": (
        "{where} does not match the keys of {there}, {keys}: {parts} (a bool may stand for a whole subtree)"
    ),
    "carry_flags_length": "{where} has {count} entries but {there} {has}; " + _GIVE_A_TREE,
    # arrays: every leaf of params, carry0, xs and consts
    "number_list": (
        "{where} is a {type} of Python numbers {value!r:.60}: a list or tuple is a tree "
        "of scalar leaves, not an array; give np.asarray({value!r:.40}) (or make each "
        "leaf an array)"
    ),
    "zero_size": "{where} has zero size (shape {shape}); every array needs at least one entry",
    "not_finite": "{where} is not finite{note}: {value}{at}{count}; {why}",
    "same_name": "{argument}: two leaves are both named {name!r} (keys joined with '.'); rename one",
    "no_params": (
        "params is {params!r}: nothing to differentiate; give at least one float array, "
        "e.g. {{'w': np.array([0.5])}}, or params={{}} with carry0_requires_grad=True or "
        "xs_requires_grad=True"
    ),
    "no_carry": (
        "carry0 is {carry0!r}: a recurrence needs a carry; give an array or a tree of arrays, e.g. (np.zeros(H),)"
    ),
    # steps: xs and length
    "no_xs": "xs is {xs!r}, a tree with no arrays; for a recurrence without inputs give xs=None and length=T",
    "scalar_xs": "{where} is a scalar; every xs leaf needs a leading time dimension, (T, ...){hint}",
    "xs_lengths": "xs leaves have different leading (time) dimensions: {steps}; every xs leaf is (T, ...) with one T",
    "zero_steps": "xs has zero steps (leading dimension 0); give at least one step",
    "xs_mixed": (
        "xs mixes integer leaves ({ints}) with float leaves ({floats}): every driver scans xs as one "
        "array per step, all integer (indices) or all float; give the integer leaves alone as xs"
    ),
    "length_value": "length must be a positive number of steps, got {length}",
    "length_xs": (
        "length={length} contradicts xs, whose leaves have {steps} steps (leading dimension); "
        "give one of them, or make them agree"
    ),
    "no_steps": "give xs (each leaf (T, ...)) or a trip count `length` = T",
    # consts
    "consts_unread": (
        "consts is only read by a custom `loss`; the loss forms (`losses`) use their own "
        "weights: give loss=... or drop consts"
    ),
    # the numpy forward
    "carry_structure": (
        "step {t} returned a carry with leaves {got} but carry0 has {want}; the step "
        "must return the carry in carry0's structure{hint}"
    ),
    "carry_shape": (
        "{where} has shape {shape} but carry0's is {want}; the step must keep every carry leaf's shape{hint}"
    ),
    "y_structure": (
        "step {t}'s output y_t has leaves and shapes {got} but step 0's has {want}; y_t "
        "must keep one structure and shape over the steps"
    ),
    "output_number": (
        "{where} is the Python {type} {value!r}; the step must return arrays computed "
        "with ops (a Python number is not traced by every framework)"
    ),
    "output_unreadable": "{where} is a {type} that numpy cannot read; the step must return arrays",
    "output_dtype": "{where} is an array of dtype {dtype}; the step must return {want} array there",
    "carry_kind": (
        "{where} is an array of dtype {dtype} but carry0's leaf is {want}; the step must keep an integer "
        "carry leaf integer and a float one float (a scan's carry keeps its dtype)"
    ),
    "loss_shape": "loss must return a scalar (shape ()); it returned shape {shape}: reduce it, e.g. with ops.sum",
    # the declared linear recurrence (`linear`)
    "linear_shape": "linear: {why}; an associative scan runs one elementwise recurrence h_t = a_t * h_(t-1) + b_t",
    "linear_return": "linear({what}) returned {got}; expected (a, b), two arrays of shape {want}",
    "linear_disagrees": (
        "linear disagrees with the step at step {t}: {what} is {got:.17g} at index {index} where the step "
        "gives {want:.17g}; declare the step's own coefficients (or call linear from the step)"
    ),
    "step_writes_input": (
        "the step writes into its input `{where}` in place at step {t} (e.g. h += x or w[...] = ...): "
        "rnnbench needs a step that returns new values (h = h + x), or the drivers and the oracle see "
        "different inputs"
    ),
}
MESSAGES = {**TYPE_PROBLEMS, **VALUE_PROBLEMS}

# What the parts of a message name or say, where a check is shared.
LABELS = {
    "new_carry": "step {t}'s new carry {leaf}",
    "output": "step {t}'s output {leaf}",
    "loss_value": "the loss's value",
    "loss": "the loss",
    "bare_carry_hint": " (a bare-array carry0 reaches the step as the 1-tuple (h,))",
    "scalar_xs_hint": " (a list or tuple is a tree of leaves, not a sequence: give np.asarray(...))",
    "rounded": " once rounded to {dtype}",
    "inputs_finite": "every input must be finite",
    "carry_finite": "the carry must stay finite (the inputs are)",
    "outputs_finite": "the outputs must stay finite (the inputs are)",
    "loss_finite": "the loss must be finite at the given inputs",
}


def text(key: str, **fields) -> str:
    """The message of MESSAGES[key], filled in with `fields`."""
    return MESSAGES[key].format(**fields)


def problem(key: str, **fields) -> Exception:
    """The exception of MESSAGES[key], its message filled in with `fields`."""
    return (TypeError if key in TYPE_PROBLEMS else InputError)(text(key, **fields))


def label(key: str, **fields) -> str:
    return LABELS[key].format(**fields)
