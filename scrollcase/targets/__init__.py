"""The accelerator seam: the target vocabulary, and what each accelerator (cpu, cuda, metal) means
for locks, evidence and hosts.
"""
