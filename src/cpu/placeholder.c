void ul__cpu_placeholder(void);
void ul__cpu_placeholder(void) {}
