"""The bottom layer: what every other layer shares and that depends on nothing of ours.

- `registry`: the name -> entry `Registry` behind recipes, reward builders, estimators, filters and rollout plans;
- `checks`: argument checks that raise one-line errors naming the field;
- `lengths`: completion text, thinking/answer split, `LengthMeter`, the EOS ids that end a completion;
- `answers`: the one answer checker (math-verify with normalisation, a string fallback), used by every reward and
  by evaluation.
"""
