"""Fake SGLang runtime, shaped like sgl-project/sglang; each module names the file and commit it follows."""
