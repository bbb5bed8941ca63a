/* Module placeholder so the library exists before its first source lands. */
void ul__api_placeholder(void);
void ul__api_placeholder(void) {}
