/* PLACEHOLDER until its kernels are written: fails, so it cannot pass unnoticed. */
int main(void) { return 1; }
