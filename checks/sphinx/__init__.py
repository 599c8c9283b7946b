"""The book's build: Sphinx extensions named in _config.yml, and the verifier behind `python -m checks`.

sphinxext (fresh numbers, records collected per chapter, the ledger page and ledger.json), parallel
(chapters executed several at a time), reader (the build-environment line on each page), notebooks (each
chapter's notebook for download and the launch buttons), ledger (the ledger's table and its verification),
fingerprint (what the chapters' numbers depend on), machine (torch's answers about the machine, kept
between builds), cache (checks.cached). Built on checks.teaching and checks.core.
"""
