"""Every message check_recurrence's input validation raises (rnnbench.api.validate), in one place:
key -> (exception type, str.format template). TypeError for a wrong type, InputError (a ValueError)
for a bad value; each names the argument (a leaf by its path, as params['W']) and what is expected."""

from __future__ import annotations

from rnnbench.errors import InputError

_GIVE_A_TREE = "give a bool or a tree shaped like carry0"

MESSAGES: dict[str, tuple[type[Exception], str]] = {
    # the functions
    "step": (TypeError, "step is {type}; expected a function step(ops, params, carry, x) -> (carry, y)"),
    "loss": (TypeError, "loss is {type}; expected a function loss(ops, consts, ys, carry) -> scalar"),
    # names and options
    "dtype": (InputError, "dtype: unknown dtype {dtype!r}; known: {known}"),
    "order": (InputError, "order must be 1 (gradients) or 2 (also Hessian-vector products), got {order!r}"),
    "oracle": (InputError, "oracle must be one of {known}; got {oracle!r}"),
    "names_type": (TypeError, "{argument} is {value!r}; expected a list of names, e.g. [{example}]"),
    "names_empty": (InputError, "{argument}=[] selects nothing; leave it None for the default"),
    "names_str": (TypeError, "{argument}: every name must be a str, got {value!r}"),
    "unknown_driver": (InputError, "drivers: {error}"),  # raised as registry.UnknownName, an InputError
    "loss_and_losses": (InputError, "give either a loss function (`loss`) or loss forms (`losses`), not both"),
    "model_loss": (InputError, "losses: loss form 'model' needs a loss function (`loss`)"),
    "unknown_loss": (InputError, "losses: {error}"),
    # flags
    "xs_flag": (TypeError, "xs_requires_grad is {flag!r}; expected a bool"),
    "xs_flag_no_xs": (InputError, "xs_requires_grad=True but xs is None: there is no input to differentiate"),
    "carry_flags_dict": (InputError, "{where} is a dict where {there} is a {type}; " + _GIVE_A_TREE),
    "carry_flags_keys": (
        InputError,
        "{where} does not match the keys of {there}, {keys}: {parts} (a bool may stand for a whole subtree)",
    ),
    "carry_flags_length": (InputError, "{where} has {count} entries but {there} {has}; " + _GIVE_A_TREE),
    "carry_flags_type": (
        TypeError,
        "{where} is {flags!r} ({type}); expected a bool (or a tree of bools shaped like carry0)",
    ),
    # arrays: every leaf of params, carry0, xs and consts
    "unreadable": (TypeError, "{where} is a {type} that numpy cannot read; expected a numpy array"),
    "not_real": (TypeError, "{where} is {what}; expected a real numeric array"),
    "not_float": (
        TypeError,
        "{where} is {what}; expected a float array (it is differentiated), e.g. np.asarray(value, dtype=float)",
    ),
    "number_list": (
        InputError,
        "{where} is a {type} of Python numbers {value!r:.60}: a list or tuple is a tree "
        "of scalar leaves, not an array; give np.asarray({value!r:.40}) (or make each "
        "leaf an array)",
    ),
    "zero_size": (InputError, "{where} has zero size (shape {shape}); every array needs at least one entry"),
    "not_finite": (InputError, "{where} is not finite{note}: {value}{at}{count}; {why}"),
    "same_name": (InputError, "{argument}: two leaves are both named {name!r} (keys joined with '.'); rename one"),
    "no_params": (
        InputError,
        "params is {params!r}: nothing to differentiate; give at least one float array, "
        "e.g. {{'w': np.array([0.5])}}, or params={{}} with carry0_requires_grad=True or "
        "xs_requires_grad=True",
    ),
    "no_carry": (
        InputError,
        "carry0 is {carry0!r}: a recurrence needs a carry; give an array or a tree of arrays, e.g. (np.zeros(H),)",
    ),
    # steps: xs and length
    "no_xs": (
        InputError,
        "xs is {xs!r}, a tree with no arrays; for a recurrence without inputs give xs=None and length=T",
    ),
    "scalar_xs": (InputError, "{where} is a scalar; every xs leaf needs a leading time dimension, (T, ...){hint}"),
    "xs_lengths": (
        InputError,
        "xs leaves have different leading (time) dimensions: {steps}; every xs leaf is (T, ...) with one T",
    ),
    "zero_steps": (InputError, "xs has zero steps (leading dimension 0); give at least one step"),
    "length_type": (TypeError, "length is {length!r}; expected an int, the number of steps T"),
    "length_value": (InputError, "length must be a positive number of steps, got {length}"),
    "length_xs": (
        InputError,
        "length={length} contradicts xs, whose leaves have {steps} steps (leading dimension); "
        "give one of them, or make them agree",
    ),
    "no_steps": (InputError, "give xs (each leaf (T, ...)) or a trip count `length` = T"),
    # consts
    "consts_unread": (
        InputError,
        "consts is only read by a custom `loss`; the loss forms (`losses`) use their own "
        "weights: give loss=... or drop consts",
    ),
    "consts_type": (TypeError, "consts is {type}; expected a dict of name -> array"),
    # the numpy forward
    "step_return": (TypeError, "step must return (carry, y_t); at step {t} it returned {type} {out!r:.80}"),
    "carry_structure": (
        InputError,
        "step {t} returned a carry with leaves {got} but carry0 has {want}; the step "
        "must return the carry in carry0's structure{hint}",
    ),
    "carry_shape": (
        InputError,
        "{where} has shape {shape} but carry0's is {want}; the step must keep every carry leaf's shape{hint}",
    ),
    "y_structure": (
        InputError,
        "step {t}'s output y_t has leaves and shapes {got} but step 0's has {want}; y_t "
        "must keep one structure and shape over the steps",
    ),
    "output_number": (
        InputError,
        "{where} is the Python {type} {value!r}; the step must return arrays computed "
        "with ops (a Python number is not traced by every framework)",
    ),
    "output_unreadable": (InputError, "{where} is a {type} that numpy cannot read; the step must return arrays"),
    "output_dtype": (InputError, "{where} is an array of dtype {dtype}; the step must return {want} array there"),
    "loss_shape": (
        InputError,
        "loss must return a scalar (shape ()); it returned shape {shape}: reduce it, e.g. with ops.sum",
    ),
}

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
    return MESSAGES[key][1].format(**fields)


def problem(key: str, **fields) -> Exception:
    """The exception of MESSAGES[key], its message filled in with `fields`."""
    return MESSAGES[key][0](text(key, **fields))


def label(key: str, **fields) -> str:
    return LABELS[key].format(**fields)
