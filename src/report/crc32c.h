/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) and the masked form TFRecord files
 * store (../shared/reference/tensorboard-format.md §2.2–2.3). */
#ifndef TR_CRC32C_H
#define TR_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t tr_crc32c(const void *data, size_t n);
/* ((crc >> 15) | (crc << 17)) + 0xA282EAD8, mod 2^32 */
uint32_t tr_crc32c_mask(uint32_t crc);

#endif
