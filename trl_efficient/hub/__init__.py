"""Hugging Face Hub integration: model cards (`hub.card`), `trl-efficient push` (`hub.push`) and model merging
(`hub.merge`). Submodules are imported where they are used; nothing is imported eagerly here."""
