"""The parity gate: run the recipe's parity script on every accelerator and compare the outputs.

``compare`` is pure arithmetic over chunked arrays, ``outputs`` reads saved outputs (``.npz`` or a
folder of ``.npy``) in bounded memory, ``protocol`` plans the script runs, ``runner`` executes them,
``report`` renders tables and JUnit cases, ``locate`` finds (or unpacks) the box to run in.
"""
